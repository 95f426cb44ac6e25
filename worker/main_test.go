package worker

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the worker starts has an owner that stops it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
