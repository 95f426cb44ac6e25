package oneprocessor

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Not parallel: GOMAXPROCS belongs to the whole test process.
func TestOneProcessorUnlessGOMAXPROCSIsSet(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(2)
	Apply(func(string) string { return "2" })
	assert.Equal(t, 2, runtime.GOMAXPROCS(0), "GOMAXPROCS set by the host is the runtime's to apply")
	Apply(func(name string) string {
		assert.Equal(t, "GOMAXPROCS", name)
		return ""
	})
	assert.Equal(t, 1, runtime.GOMAXPROCS(0))
}
