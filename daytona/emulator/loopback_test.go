package emulator_test

import (
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

func TestServeLoopbackServesAndCleansUp(t *testing.T) {
	t.Parallel()
	l, err := emulator.ServeLoopback(emulator.Options{})
	require.NoError(t, err)
	root := l.Root()
	req, err := http.NewRequest("GET", l.APIURL+"/sandbox", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+emulator.DevAPIKey)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 200, res.StatusCode)

	require.NoError(t, l.Close())
	_, err = os.Stat(root)
	assert.True(t, os.IsNotExist(err), "the temporary root is removed")
	_, err = http.DefaultClient.Do(req)
	assert.Error(t, err, "nothing listens any more")
}
