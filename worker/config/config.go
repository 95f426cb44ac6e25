package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
)

// Config defaults, in the units the plugin uses.
const (
	DefaultTimeoutMs          = 300_000
	DefaultLivenessTimeoutMs  = 30_000
	DefaultAutoStopMinutes    = 15
	DefaultAutoArchiveMinutes = 60
	DefaultAutoDeleteMinutes  = 7 * 24 * 60
	maxConfigTimeoutMs        = 86_400_000
)

// Driver is a parsed environment config, with exactly the keys (and JSON
// key order) of the plugin's normalizedConfig. Absent optional values are
// nil and encode as null.
type Driver struct {
	APIKey              *string  `json:"apiKey"`
	APIURL              *string  `json:"apiUrl"`
	Target              *string  `json:"target"`
	Snapshot            *string  `json:"snapshot"`
	Image               *string  `json:"image"`
	Language            *string  `json:"language"`
	TimeoutMs           float64  `json:"timeoutMs"`
	LivenessTimeoutMs   float64  `json:"livenessTimeoutMs"`
	CPU                 *float64 `json:"cpu"`
	Memory              *float64 `json:"memory"`
	Disk                *float64 `json:"disk"`
	GPU                 *float64 `json:"gpu"`
	AutoStopInterval    float64  `json:"autoStopInterval"`
	AutoArchiveInterval float64  `json:"autoArchiveInterval"`
	AutoDeleteInterval  float64  `json:"autoDeleteInterval"`
	ReuseLease          bool     `json:"reuseLease"`
	ArchiveOnRelease    bool     `json:"archiveOnRelease"`
}

// Raw is the host's config object, decoded with JSON numbers kept.
type Raw map[string]any

// Decode decodes the config member of a method's params: the host's
// object as sent (metadata and validation read its keys) and the plugin's
// lenient parse of it. Every handler that takes a config decodes it here.
// The plugin reads the config's members without a check: an absent or null
// config makes that read throw (invalid params here), while any other value
// that is not an object (a string, a number, an array) has none of the
// members it reads, so it parses as an empty config.
func Decode(method string, raw json.RawMessage) (Raw, Driver, error) {
	rc, err := DecodeRaw(raw)
	if err != nil {
		return nil, Driver{}, protocol.InvalidParams(method, err)
	}
	return rc, Parse(rc), nil
}

var errConfigMissing = errors.New("params.config must be an object")

// DecodeRaw decodes the host's config object alone (see Decode).
func DecodeRaw(raw json.RawMessage) (Raw, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, errConfigMissing
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("params.config: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Raw{}, nil
	}
	return m, nil
}

// Parse mirrors the plugin's parseDriverConfig exactly: lenient, never
// failing, with JavaScript's coercions. Validation is separate.
func Parse(raw Raw) Driver {
	str := func(key string) *string {
		if s, ok := OptionalString(raw[key]); ok {
			return &s
		}
		return nil
	}
	numberOr := func(key string, fallback float64) float64 {
		v, present := raw[key]
		if !present || v == nil {
			return fallback
		}
		if n := js.Number(v); js.IsFinite(n) {
			return js.Trunc(n)
		}
		return fallback
	}
	optional := func(key string, trunc bool) *float64 {
		v, present := raw[key]
		if !present || v == nil || v == "" {
			return nil
		}
		n := js.Number(v)
		if !js.IsFinite(n) {
			return nil
		}
		if trunc {
			n = js.Trunc(n)
		}
		return &n
	}
	orDefault := func(p *float64, d float64) float64 {
		if p == nil {
			return d
		}
		return *p
	}
	return Driver{
		APIKey:              str("apiKey"),
		APIURL:              str("apiUrl"),
		Target:              str("target"),
		Snapshot:            str("snapshot"),
		Image:               str("image"),
		Language:            str("language"),
		TimeoutMs:           numberOr("timeoutMs", DefaultTimeoutMs),
		LivenessTimeoutMs:   numberOr("livenessTimeoutMs", DefaultLivenessTimeoutMs),
		CPU:                 optional("cpu", false),
		Memory:              optional("memory", false),
		Disk:                optional("disk", false),
		GPU:                 optional("gpu", false),
		AutoStopInterval:    orDefault(optional("autoStopInterval", true), DefaultAutoStopMinutes),
		AutoArchiveInterval: orDefault(optional("autoArchiveInterval", true), DefaultAutoArchiveMinutes),
		AutoDeleteInterval:  orDefault(optional("autoDeleteInterval", true), DefaultAutoDeleteMinutes),
		ReuseLease:          raw["reuseLease"] == true,
		ArchiveOnRelease:    raw["archiveOnRelease"] == true,
	}
}

// HasResourceRequest reports whether the config asks for CPU, memory, disk
// or GPU.
func (c Driver) HasResourceRequest() bool {
	return c.CPU != nil || c.Memory != nil || c.Disk != nil || c.GPU != nil
}

// The plugin's messages that the worker also gives outside validation.
const (
	msgResourcesNeedImage        = "Daytona resource settings require image-backed sandbox creation; snapshot/default sandbox creation cannot override CPU, memory, disk, or GPU."
	MsgRuntimeResourcesNeedImage = "Daytona resource settings require image-backed sandbox creation; default sandbox creation cannot override CPU, memory, disk, or GPU."
	MsgAPIKeyRequired            = "Daytona sandbox environments require an API key in config or DAYTONA_API_KEY."
)

// Validate returns the plugin's validation errors, in its order.
func Validate(raw Raw, c Driver, envAPIKey string) []string {
	var errs []string
	if s, ok := raw["image"].(string); ok && js.Trim(s) == "" {
		errs = append(errs, "Daytona image cannot be empty.")
	}
	if s, ok := raw["snapshot"].(string); ok && js.Trim(s) == "" {
		errs = append(errs, "Daytona snapshot cannot be empty.")
	}
	if c.Image != nil && c.Snapshot != nil {
		errs = append(errs, "Daytona sandbox environments must set either image or snapshot, not both.")
	}
	if c.APIURL != nil && !isValidURL(*c.APIURL) {
		errs = append(errs, "apiUrl must be a valid URL.")
	}
	if c.TimeoutMs < 1 || c.TimeoutMs > maxConfigTimeoutMs {
		errs = append(errs, "timeoutMs must be between 1 and 86400000.")
	}
	if c.LivenessTimeoutMs > maxConfigTimeoutMs {
		errs = append(errs, "livenessTimeoutMs must be less than or equal to 86400000.")
	}
	if c.AutoStopInterval < 0 {
		errs = append(errs, "autoStopInterval must be greater than or equal to 0.")
	}
	if c.AutoArchiveInterval < 0 {
		errs = append(errs, "autoArchiveInterval must be greater than or equal to 0.")
	}
	if c.AutoDeleteInterval < -1 {
		errs = append(errs, "autoDeleteInterval must be greater than or equal to -1.")
	}
	if c.APIKey == nil && js.Trim(envAPIKey) == "" {
		errs = append(errs, MsgAPIKeyRequired)
	}
	if c.HasResourceRequest() && c.Image == nil {
		errs = append(errs, msgResourcesNeedImage)
	}
	for _, r := range []struct {
		name  string
		value *float64
	}{{"cpu", c.CPU}, {"memory", c.Memory}, {"disk", c.Disk}, {"gpu", c.GPU}} {
		if r.value != nil && *r.value <= 0 {
			errs = append(errs, r.name+" must be greater than 0 when provided.")
		}
	}
	return errs
}

// RuntimeResourceError is the check made before creating a sandbox: a
// snapshot brings its own resources, so they are dropped rather than failing.
func (c Driver) RuntimeResourceError() string {
	if !c.HasResourceRequest() || c.Image != nil || c.Snapshot != nil {
		return ""
	}
	return MsgRuntimeResourcesNeedImage
}

// OptionalString is the plugin's parseOptionalString: a string that is not
// blank, trimmed, or absent.
func OptionalString(v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		return "", false
	}
	s = js.Trim(s)
	return s, s != ""
}
