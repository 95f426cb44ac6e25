package worker

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
)

// TestInitializeTakesParamsOfAnyShape: the runtime reads initialize's
// members without checking their types, so a member of another type than
// the host sends today (which this plugin never reads) must not stop the
// worker from starting.
func TestInitializeTakesParamsOfAnyShape(t *testing.T) {
	for _, params := range []string{
		`{"manifest":{},"config":{},"instanceInfo":{"instanceId":"i","hostVersion":"1"},"apiVersion":1,"databaseNamespace":null}`,
		`{"manifest":{},"config":{},"instanceInfo":{"instanceId":1,"hostVersion":2,"deploymentMode":false},"apiVersion":"1","databaseNamespace":3}`,
		`{"instanceInfo":"x","apiVersion":1.5}`,
		`"x"`, `[1]`, `7`, `null`, ``,
	} {
		w := New(discardHost{}, Options{Logger: zerolog.Nop()})
		res, err := w.Handle(context.Background(), requestOf(protocol.MethodInitialize, params))
		require.NoError(t, err, "params %s", params)
		assert.True(t, res.(protocol.InitializeResult).OK)
		_, err = w.Handle(context.Background(), requestOf(protocol.MethodInitialize, params))
		assert.EqualError(t, err, "Worker already initialized")
	}
}

// TestConfigChangedFollowsTheSDKGuard: companyId ?? null of any type, ===
// between company ids, configs compared canonically with an absent config
// the same as null, params that are not objects read as having no members.
func TestConfigChangedFollowsTheSDKGuard(t *testing.T) {
	const refusal = `configChanged: refusing to overwrite configuration for company "%s" with a different configuration for company "%s". This plugin is single-tenant and cannot safely serve multiple companies from one worker. If multi-company support is intended, set multiCompanyConfig: true on the plugin definition and key per-company state on context.companyId.`
	type step struct {
		params  string
		refused [2]string // the companies the refusal names; empty: accepted
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"same company, any config", []step{
			{`{"config":{"a":1},"companyId":"c-1"}`, [2]string{}},
			{`{"config":{"a":2},"companyId":"c-1"}`, [2]string{}},
		}},
		{"another company, another config", []step{
			{`{"config":{"a":1},"companyId":"c-1"}`, [2]string{}},
			{`{"config":{"a":2},"companyId":"c-2"}`, [2]string{"c-1", "c-2"}},
			{`{"config":{"a":2},"companyId":null}`, [2]string{}},
			{`{"config":{"a":3}}`, [2]string{}},
			{`{"config":{"a":4},"companyId":"c-2"}`, [2]string{"c-1", "c-2"}},
			{`{"config":{"a":3},"companyId":"c-2"}`, [2]string{}},
		}},
		{"another company, the same config in another key order", []step{
			{`{"config":{"a":1,"b":[1,{"c":2,"d":3}]},"companyId":"c-1"}`, [2]string{}},
			{`{"config":{"b":[1,{"d":3,"c":2}],"a":1},"companyId":"c-2"}`, [2]string{}},
		}},
		{"numeric company ids compare by value", []step{
			{`{"config":{"a":1},"companyId":5}`, [2]string{}},
			{`{"config":{"a":2},"companyId":5.0}`, [2]string{}},
			{`{"config":{"a":3},"companyId":"5"}`, [2]string{"5", "5"}},
			{`{"config":{"a":3},"companyId":true}`, [2]string{"5", "true"}},
		}},
		{"a number beyond float64 is Infinity, as String() writes it", []step{
			{`{"config":{"a":1},"companyId":1e400}`, [2]string{}},
			{`{"config":{"a":2},"companyId":2e400}`, [2]string{}},
			{`{"config":{"a":3},"companyId":"Infinity"}`, [2]string{"Infinity", "Infinity"}},
			{`{"config":{"a":3},"companyId":[-1e400]}`, [2]string{"Infinity", "-Infinity"}},
		}},
		{"object and array company ids are never the same one", []step{
			{`{"config":{"a":1},"companyId":{"id":"c"}}`, [2]string{}},
			{`{"config":{"a":2},"companyId":{"id":"c"}}`, [2]string{"[object Object]", "[object Object]"}},
			{`{"config":{"a":2},"companyId":[1,null,"x"]}`, [2]string{"[object Object]", "1,,x"}},
		}},
		{"an absent config is null", []step{
			{`{"companyId":"c-1"}`, [2]string{}},
			{`{"config":null,"companyId":"c-2"}`, [2]string{}},
			{`{"config":{},"companyId":"c-3"}`, [2]string{"c-2", "c-3"}},
		}},
		{"params that are not objects", []step{
			{`{"config":{"a":1},"companyId":"c-1"}`, [2]string{}},
			{`"x"`, [2]string{}},
			{`[1]`, [2]string{}},
			{`{"config":{"a":2},"companyId":"c-2"}`, [2]string{"c-1", "c-2"}},
			{`{"config":null,"companyId":"c-2"}`, [2]string{}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(discardHost{}, Options{Logger: zerolog.Nop()})
			for i, s := range tt.steps {
				_, err := w.Handle(context.Background(), requestOf(protocol.MethodConfigChanged, s.params))
				if s.refused == [2]string{} {
					assert.NoError(t, err, "step %d: %s", i, s.params)
					continue
				}
				var pe *protocol.Error
				require.ErrorAs(t, err, &pe, "step %d: %s", i, s.params)
				assert.Equal(t, protocol.CodeCrossTenantConfig, pe.Code)
				assert.Equal(t, protocol.Errorf(0, refusal, s.refused[0], s.refused[1]).Message, pe.Message, "step %d", i)
			}
		})
	}
}
