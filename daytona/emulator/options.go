package emulator

import (
	"time"

	"github.com/rs/zerolog"
)

// DevAPIKey is the bearer key the emulator accepts when Options.APIKey is empty.
// It is a public, fixed development value, not a secret.
const DevAPIKey = "daytona-emulator-dev-key"

// DefaultStepDelay is how long one lifecycle step (creating, stopping, ...) lasts
// when Options.StepDelay is zero.
const DefaultStepDelay = 25 * time.Millisecond

// Synchronous, used as Options.StepDelay, makes every lifecycle step complete
// inside the request that starts it.
const Synchronous time.Duration = -1

// DefaultOrganizationID is the organizationId reported on every sandbox.
const DefaultOrganizationID = "00000000-0000-4000-8000-00000000e0e0"

// Options configure a Server. The zero value is usable.
type Options struct {
	// Root is the folder that holds sandboxes and snapshots. Empty: a temporary
	// folder that Close removes.
	Root string

	// APIKey is the bearer key required on every route. Empty: DevAPIKey.
	APIKey string

	// StepDelay is the duration of each lifecycle step (creating → started,
	// stopping → stopped, ...). Zero selects DefaultStepDelay; Synchronous (any
	// negative value) completes steps inside the request.
	StepDelay time.Duration

	// ReturnTransitional makes create, start and recover answer at once with the
	// transitional state (creating, starting, ...). By default they behave like
	// the real server: they hold the response until the sandbox is started
	// (bounded by 30 s).
	ReturnTransitional bool

	// ArchiveDelay is how long archiving lasts (archiving → archived). Zero:
	// one step (StepDelay); Synchronous: at once. Daytona archives by moving
	// the sandbox's file system to object storage, which takes far longer
	// than a start or a stop; a start or a delete meanwhile goes through.
	ArchiveDelay time.Duration

	// Clock reads the current time for timestamps, TTL, auto-stop, auto-archive
	// and auto-delete bookkeeping. Nil: time.Now. Step delays use real time
	// unless ClockTimers.
	Clock func() time.Time

	// ClockTimers measures the emulator's own delays (lifecycle steps,
	// archiving, ExitCodeDelay faults, a /process/execute timeout) on its
	// clock (Clock plus AdvanceClock) instead of real time, so a test drives
	// them: they fall due when that clock passes them, and run where the
	// lifecycle timers are checked (before every request, every
	// ReapInterval, on Reap and AdvanceClock). With a Clock that stands
	// still, nothing happens until the test advances it.
	ClockTimers bool

	// ReapInterval is how often lifecycle timers (TTL, auto-stop, auto-archive,
	// auto-delete) are checked in the background. Zero: one second. They are also
	// checked before every request and on Server.Reap.
	ReapInterval time.Duration

	// LogFrameSize bounds the size of each binary frame on a session-log
	// WebSocket. Zero: 1024, like the daemon's 1 KiB reads.
	LogFrameSize int

	// LogFrameSplit, when set, further cuts every log chunk into frames at
	// offsets it chooses (see SplitEvery, SplitInsideMarkers, SplitRandom), so
	// client demuxers meet markers cut across frames.
	LogFrameSplit FrameSplitter

	// Shell is the shell used for commands, sessions and PTYs. Empty: bash from
	// PATH, else /bin/sh.
	Shell string

	// DefaultSnapshot is used when a create names neither a snapshot nor a build.
	// Empty: "daytona-small".
	DefaultSnapshot string

	// Target is the region reported on sandboxes that do not ask for one.
	// Empty: "us".
	Target string

	// OrganizationID is reported on sandboxes. Empty: DefaultOrganizationID.
	OrganizationID string

	// Logger receives the emulator's logs. Nil: discard.
	Logger *zerolog.Logger
}

func (o Options) stepDelay() time.Duration {
	switch {
	case o.StepDelay < 0:
		return 0
	case o.StepDelay == 0:
		return DefaultStepDelay
	default:
		return o.StepDelay
	}
}

func (o Options) archiveDelay() time.Duration {
	switch {
	case o.ArchiveDelay < 0:
		return 0
	case o.ArchiveDelay == 0:
		return o.stepDelay()
	default:
		return o.ArchiveDelay
	}
}

func (o Options) reapInterval() time.Duration {
	if o.ReapInterval <= 0 {
		return time.Second
	}
	return o.ReapInterval
}

func (o Options) logFrameSize() int {
	if o.LogFrameSize <= 0 {
		return 1024
	}
	return o.LogFrameSize
}

func (o Options) defaultSnapshot() string {
	if o.DefaultSnapshot == "" {
		return "daytona-small"
	}
	return o.DefaultSnapshot
}

func (o Options) target() string {
	if o.Target == "" {
		return "us"
	}
	return o.Target
}

func (o Options) organizationID() string {
	if o.OrganizationID == "" {
		return DefaultOrganizationID
	}
	return o.OrganizationID
}

func (o Options) apiKey() string {
	if o.APIKey == "" {
		return DevAPIKey
	}
	return o.APIKey
}
