// Package worker implements the Daytona sandbox-provider plugin: it answers
// the host's lifecycle and environment-driver methods, holds per-lease state
// (sandbox handles, sessions, gates) and talks to Daytona through package
// daytona. Its subpackages hold what the handlers use but do not depend on:
// the driver config (config), the login-shell script (shell) and an
// execute's output pipeline (output).
package worker
