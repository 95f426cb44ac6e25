// Package config reads an environment's driver config as the plugin does:
// Decode parses the host's config object with the plugin's lenient
// JavaScript coercions (Parse) and Validate lists the plugin's validation
// errors in its order, apiUrl checked as WHATWG's URL parser would.
package config
