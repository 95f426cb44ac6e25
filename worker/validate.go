package worker

import (
	"context"
	"encoding/json"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// validationResult is environmentValidateConfig's result; normalizedConfig
// is present only when ok.
type validationResult struct {
	OK               bool           `json:"ok"`
	Errors           []string       `json:"errors,omitempty"`
	NormalizedConfig *config.Driver `json:"normalizedConfig,omitempty"`
}

func (w *Worker) validateConfig(_ context.Context, raw json.RawMessage) (any, error) {
	var params protocol.ValidateEnvironmentConfigParams
	if err := decodeParams(protocol.MethodEnvironmentValidateConfig, raw, &params); err != nil {
		return nil, err
	}
	rc, cfg, err := config.Decode(protocol.MethodEnvironmentValidateConfig, params.Config)
	if err != nil {
		return nil, err
	}
	if errs := config.Validate(rc, cfg, w.env("DAYTONA_API_KEY")); len(errs) > 0 {
		return validationResult{OK: false, Errors: errs}, nil
	}
	return validationResult{OK: true, NormalizedConfig: &cfg}, nil
}
