// Package worker implements the Daytona sandbox-provider plugin: it answers
// the host's lifecycle and environment-driver methods, holds per-lease state
// (sandbox handles, sessions, gates) and talks to Daytona through package
// daytona.
package worker
