// Package output is an execute's output pipeline: it collects a command's
// stdout and stderr in blocks (Buffer), relays them to the host as
// execute.log notifications as they arrive (Relay), and writes the final
// result (Result) so that it stays within what the host reads in one
// message. Every string is encoded as JSON straight from the blocks, never
// copied whole.
//
// The pieces behind that API: the JSON string writer, which replaces
// ill-formed UTF-8 as Node decodes it; the escape map, which lets the result
// reuse what the notifications' encoding found; the middle trim, which lets
// a command print without end in bounded memory; the byte-order-mark
// dropper (MarkDropper); and the match of a logs snapshot against what was
// streamed (Relay.UnstreamedTail).
package output
