package daytona

// What the package's own tests define that its external tests (package
// daytona_test, next to them) use too.

type SyncBuffer = syncBuffer

var PatternHash = patternHash

// NewPatternReader generates n deterministic bytes (see PatternHash).
func NewPatternReader(n int64) *patternReader { return &patternReader{n: n} }
