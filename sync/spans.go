package sync

import "time"

// Tracer starts spans; the worker's tracer reports each ended span to the
// host with span.record when the call carries a traceparent.
type Tracer interface {
	StartSpan(name string, attributes map[string]any, start time.Time) Span
}

// Span is one traced step.
type Span interface {
	SetAttribute(key string, value any)
	// SetError marks the span failed (OpenTelemetry status code 2).
	SetError()
	// End finishes the span; later calls do nothing.
	End(end time.Time)
}

type noTracer struct{}

func (noTracer) StartSpan(string, map[string]any, time.Time) Span { return noSpan{} }

type noSpan struct{}

func (noSpan) SetAttribute(string, any) {}
func (noSpan) SetError()                {}
func (noSpan) End(time.Time)            {}

// Span names and attribute keys of the plugin's tracing contract.
const (
	spanEnsureDirectory   = "ensureDirectory"
	spanTransfer          = "transfer"
	spanPromote           = "promote"
	spanPack              = "pack"
	spanExtractTarball    = "extractTarball"
	spanPostUploadCommand = "postUploadCommand"

	attrPrefix             = "paperclip.sandbox.startup."
	attrProvider           = attrPrefix + "provider"
	attrPackWallMs         = attrPrefix + "pack.wall_ms"
	attrTransferWallMs     = attrPrefix + "transfer.wall_ms"
	attrTransferGuardCount = attrPrefix + "transfer.guard.count"
	attrTransferDirection  = attrPrefix + "transfer.direction"

	directionInbound  = "inbound"
	directionOutbound = "outbound"
)

// spanOptions configure one withSpan step.
type spanOptions struct {
	name       string
	wallMsAttr string // "" for none
	attributes map[string]any
}

// withSpan is the plugin's withProviderSpan: it starts the span with the
// provider attribute, runs fn, marks a failure, records the wall time when
// asked and always ends the span.
func withSpan[T any](c *Config, o spanOptions, fn func() (T, error)) (T, error) {
	attrs := map[string]any{attrProvider: "daytona"}
	for k, v := range o.attributes {
		attrs[k] = v
	}
	start := c.Now()
	span := c.Tracer.StartSpan(o.name, attrs, start)
	v, err := fn()
	if err != nil {
		span.SetError()
	}
	end := c.Now()
	if o.wallMsAttr != "" {
		span.SetAttribute(o.wallMsAttr, end.Sub(start).Milliseconds())
	}
	span.End(end)
	return v, err
}

// withSpanErr is withSpan for steps without a value.
func withSpanErr(c *Config, o spanOptions, fn func() error) error {
	_, err := withSpan(c, o, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}
