package refcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestZZDebug(t *testing.T) {
	sc, err := Load(os.Getenv("ZZ_SCENARIO"))
	if err != nil { t.Fatal(err) }
	steps := map[int]bool{}
	for _, s := range strings.Split(os.Getenv("ZZ_STEPS"), ",") { n, _ := strconv.Atoi(s); steps[n] = true }
	for _, side := range []struct{ name string; argv []string }{{"reference", []string{"node", "/tmp/reference-worker/worker.mjs"}}, {"worker", []string{"../../bin/daytona-worker"}}} {
		out, err := Play(context.Background(), sc, Command{Argv: side.argv}, Options{}, side.name)
		if err != nil { t.Fatal(err) }
		for i := range out {
			if !steps[i] { continue }
			a, _ := json.Marshal(out[i])
			fmt.Printf("%s step %d: %s\n", side.name, i, a)
		}
	}
}
