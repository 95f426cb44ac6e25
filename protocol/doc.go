// Package protocol holds the wire contract between the Paperclip host and a
// sandbox-provider plugin worker: method and notification names, the exact
// list of methods the Daytona worker advertises, JSON-RPC and plugin error
// codes, the params and results of every host→worker method, the payloads of
// every worker→host notification and call, and the strict base64 codec used
// for duplex-channel bytes.
//
// The types mirror @paperclipai/plugin-sdk's protocol.d.ts. Decoding tolerates
// unknown JSON members everywhere (the host adds keys over time); optional
// members are pointers or omitempty so that what the worker writes has exactly
// the keys the Node worker would write.
package protocol
