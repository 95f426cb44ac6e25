// Package js holds the JavaScript rules the Node plugin's behaviour depends
// on: Number() and String() of a JSON value (String is also a template
// literal's text), truthiness, the member order of an object JSON.parse
// builds, JSON.stringify's output (and the plugin's stableStringify, keys
// sorted), Date.parse and toISOString, Buffer.from of an array or
// array-like object, and String.prototype.trim and toLowerCase.
// The worker reproduces the plugin's host-visible behaviour with these; what
// the plugin does with each value stays with its callers.
//
// Values are JSON decoded by Decode: nil, bool, string, json.Number, []any
// and *Object.
package js
