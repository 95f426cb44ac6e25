package worker

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// scope identifies one lease the way the plugin's handle cache does: the
// driver key, company, environment, provider lease id and the account (a
// digest of the API URL and the resolved key, never the key itself).
type scope struct {
	driverKey       string
	companyID       string
	environmentID   string
	providerLeaseID string
	// idValue is the providerLeaseId as the host sent it when it was no
	// string (providerLeaseID is then its String(), the id looked up): the
	// plugin keys its state by the value itself, and no sandbox's id can
	// equal it (see leaseIDValue).
	idValue   any
	config    config.Driver
	apiKey    string // the resolved key; never part of key()
	account   string
	cachedKey string // key(), computed once by scopeFor
}

// key is the stable JSON the plugin keys all per-lease state by.
func (s scope) key() string {
	if s.cachedKey != "" {
		return s.cachedKey
	}
	var id any = s.providerLeaseID
	if s.idValue != nil {
		id = s.idValue
	}
	return js.StableStringify(map[string]any{
		"driverKey":       s.driverKey,
		"companyId":       s.companyID,
		"environmentId":   s.environmentID,
		"providerLeaseId": id,
		"account":         s.account,
	})
}

// withIDValue is the scope of a lease whose id was sent as v, no string
// (nil: the scope as it is).
func (s scope) withIDValue(v any) scope {
	if v == nil {
		return s
	}
	s.idValue = v
	s.cachedKey = ""
	s.cachedKey = s.key()
	return s
}

// owns is the plugin's handle check: the sandbox id is the lease's id.
func (s scope) owns(sandboxID string) bool {
	return s.idValue == nil && sandboxID == s.providerLeaseID
}

// accountFingerprint is the plugin's sandboxAccountDiscriminator: the
// sha256 of the stable JSON {apiKey, apiUrl} with the resolved key. It is
// also the cleanup envelope's accountFingerprint.
func accountFingerprint(c config.Driver, resolvedKey string) string {
	var key, apiURL any
	if resolvedKey != "" {
		key = resolvedKey
	}
	if c.APIURL != nil {
		apiURL = *c.APIURL
	}
	sum := sha256.Sum256([]byte(js.StableStringify(map[string]any{"apiUrl": apiURL, "apiKey": key})))
	return hex.EncodeToString(sum[:])
}
