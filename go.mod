module github.com/paperclipai/daytona-worker

go 1.26.8

require (
	github.com/coder/websocket v1.8.15
	github.com/creack/pty v1.1.24
	github.com/google/uuid v1.6.0
	github.com/rs/zerolog v1.35.1
	github.com/sourcegraph/jsonrpc2 v0.2.1
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.29.0
)

require (
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
