package main

import (
	"hash/maphash"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each relay command prints exactly the bytes its digest was computed from.
func TestRelayOutputsPrintWhatTheyPromise(t *testing.T) {
	t.Parallel()
	seed := maphash.MakeSeed()
	for _, out := range relayOutputs(seed, 1, 1) {
		t.Run(out.name, func(t *testing.T) {
			t.Parallel()
			got, err := exec.Command("sh", "-c", out.script).Output()
			require.NoError(t, err)
			assert.EqualValues(t, out.size, len(got))
			assert.Equal(t, out.sum, maphash.Bytes(seed, got), "digest of the command's output")
		})
	}
}

func TestReportFigures(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "1.00 / 2.50 / 10.0", spread([]float64{10, 1, 2, 3}))
	assert.Equal(t, "—", spread(nil))
	// Paired: the median of run-by-run ratios.
	assert.Equal(t, "0.5×", pairedRatio([]float64{1, 2, 30}, []float64{2, 4, 10}))
	// Unpaired: the ratio of medians.
	assert.Equal(t, "0.5×", pairedRatio([]float64{1, 2, 3}, []float64{4}))
	assert.Equal(t, "2 of 3 runs", yesCount([]float64{1, 0, 1}))
	for v, want := range map[float64]string{0: "0", 1234.5: "1234", 12.34: "12.3", 1.234: "1.23", 0.01234: "0.0123"} {
		assert.Equal(t, want, num(v))
	}
}

func TestTablePrintsBothSidesAndTheYardsticks(t *testing.T) {
	t.Parallel()
	var tb table
	for i := range 3 {
		tb.add("cold start", "spawn → reply", "ms", sideGo, float64(10+i))
		tb.add("cold start", "spawn → reply", "ms", sideNode, float64(1000+i))
		tb.add("cold start", "spawn → reply", "ms", sideFloor, float64(5+i))
		tb.add("cold start", "spawn → reply", "ms", sideLibFloor, float64(8+i))
		tb.add("cold start", "spawn → reply", "ms", sideHTTPFloor, float64(7+i))
		tb.add("relay", "exact", unitYesNo, sideGo, 1)
		tb.add("relay", "exact", unitYesNo, sideNode, float64(i%2))
	}
	var b strings.Builder
	tb.print(&b)
	out := b.String()
	assert.Contains(t, out, "| cold start | spawn → reply (ms) | 10.0 / 11.0 / 12.0 | 1000 / 1001 / 1002 | 0.011× |")
	assert.Contains(t, out, "| cold start | spawn → reply (ms), trivial Go binary | 5.00 / 6.00 / 7.00 |  | daytona-worker ÷ trivial Go binary: 1.83× |")
	assert.Contains(t, out, "| cold start | spawn → reply (ms), trivial Go binary with the worker's imports | 8.00 / 9.00 / 10.0 |  | daytona-worker ÷ trivial Go binary with the worker's imports: 1.22× |")
	assert.Contains(t, out, "| cold start | spawn → reply (ms), trivial Go binary linking net/http | 7.00 / 8.00 / 9.00 |  | daytona-worker ÷ trivial Go binary linking net/http: 1.38× |")
	// The yardsticks follow the row, the narrowest first.
	assert.Less(t, strings.Index(out, "trivial Go binary linking net/http"), strings.Index(out, "trivial Go binary with the worker's imports"))
	assert.Contains(t, out, "| relay | exact | 3 of 3 runs | 1 of 3 runs |  |")
}
