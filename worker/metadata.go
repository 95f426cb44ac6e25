package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/worker/config"
	"github.com/paperclipai/daytona-worker/worker/shell"
)

const (
	providerName             = "daytona"
	sentinelRelativePath     = ".paperclip-runtime/reusable-sandbox-lease.json"
	labelProvider            = "paperclip-provider"
	labelCompany             = "paperclip-company-id"
	labelEnvironment         = "paperclip-environment-id"
	labelReuse               = "paperclip-reuse-lease"
	labelRun                 = "paperclip-run-id"
	labelSetupSession        = "paperclip-setup-session-id"
	labelPurpose             = "paperclip-purpose"
	labelCreateAttempt       = "paperclip-create-attempt"
	createNamePrefix         = "paperclip-create-"
	sentinelResultWritten    = "written"
	sentinelResultSkipped    = "skipped"
	sentinelResultMatched    = "matched"
	sentinelResultMissing    = "missing"
	sentinelResultMismatched = "mismatch"
)

// labelInput is what the plugin's buildSandboxLabels takes, plus the create
// attempt that makes an uncertain creation findable.
type labelInput struct {
	companyID, environmentID string
	reuseLease               bool
	runID, setupSessionID    string
	purpose, attemptID       string
}

func buildLabels(in labelInput) map[string]string {
	labels := map[string]string{
		labelProvider:    providerName,
		labelCompany:     in.companyID,
		labelEnvironment: in.environmentID,
		labelReuse:       "false",
	}
	if in.reuseLease {
		labels[labelReuse] = "true"
	}
	if in.runID != "" {
		labels[labelRun] = in.runID
	}
	if in.setupSessionID != "" {
		labels[labelSetupSession] = in.setupSessionID
	}
	if in.purpose != "" {
		labels[labelPurpose] = in.purpose
	}
	if in.attemptID != "" {
		labels[labelCreateAttempt] = in.attemptID
	}
	return labels
}

// createParams is the plugin's buildCreateParams: an image brings resources,
// a snapshot (or the default) does not.
func createParams(cfg config.Driver, name string, labels map[string]string) daytona.CreateParams {
	p := daytona.CreateParams{
		Name:                name,
		Labels:              labels,
		AutoStopInterval:    new(cfg.AutoStopInterval),
		AutoArchiveInterval: new(cfg.AutoArchiveInterval),
		AutoDeleteInterval:  new(cfg.AutoDeleteInterval),
	}
	if cfg.Language != nil {
		p.Language = *cfg.Language
	}
	if cfg.Image != nil {
		p.Image = *cfg.Image
		if cfg.HasResourceRequest() {
			// The numbers as the plugin passes them: a fraction is not
			// truncated here, Daytona takes or refuses it.
			p.Resources = &daytona.Resources{CPU: cfg.CPU, Memory: cfg.Memory, Disk: cfg.Disk, GPU: cfg.GPU}
		}
		return p
	}
	if cfg.Snapshot != nil {
		p.Snapshot = *cfg.Snapshot
	}
	return p
}

// sentinel is the workspace identity proof a lease carries.
type sentinel struct {
	Path            string  `json:"path"`
	Token           *string `json:"token"`
	Result          string  `json:"result"`
	RunID           string  `json:"runId,omitempty"`
	ProviderLeaseID string  `json:"providerLeaseId,omitempty"`
}

func sentinelPath(remoteCwd string) string { return path.Join(remoteCwd, sentinelRelativePath) }

// sentinelIdentity is the acquire params the workspace sentinel is made of,
// as the host sent them: any JSON value, or absent (undefined).
type sentinelIdentity struct {
	companyID, environmentID, agentID, executionWorkspaceID, issueID, adapterType jsMember
}

// jsMember is one params member: its decoded value, and whether it was sent.
type jsMember struct {
	v       any
	present bool
}

func memberOf(obj map[string]json.RawMessage, key string) jsMember {
	v, ok := js.Decode(obj[key])
	return jsMember{v: v, present: ok}
}

// stable is the member's value for js.StableStringify, where undefined is null.
func (m jsMember) stable() any {
	if !m.present {
		return nil
	}
	return m.v
}

// orNull is `member ?? null`.
func (m jsMember) orNull() any { return m.stable() }

func (m jsMember) truthy() bool { return m.present && js.Truthy(m.v) }

// sentinelIdentityOf reads the sentinel's members from acquire's params.
func sentinelIdentityOf(obj map[string]json.RawMessage) sentinelIdentity {
	return sentinelIdentity{
		companyID: memberOf(obj, "companyId"), environmentID: memberOf(obj, "environmentId"),
		agentID: memberOf(obj, "agentId"), executionWorkspaceID: memberOf(obj, "executionWorkspaceId"),
		issueID: memberOf(obj, "issueId"), adapterType: memberOf(obj, "adapterType"),
	}
}

// sentinelToken is the plugin's workspaceSentinelToken: the sha256 of the
// stable JSON of the lease identity, or none when the lease is not reusable
// or lacks an agent and a workspace or issue (each tested for truthiness).
func sentinelToken(id sentinelIdentity, cfg config.Driver) (string, bool) {
	if !cfg.ReuseLease || !id.agentID.truthy() || !id.executionWorkspaceID.truthy() && !id.issueID.truthy() {
		return "", false
	}
	identity := map[string]any{
		"provider":             providerName,
		"companyId":            id.companyID.stable(),
		"environmentId":        id.environmentID.stable(),
		"agentId":              id.agentID.stable(),
		"executionWorkspaceId": id.executionWorkspaceID.stable(),
		"adapterType":          id.adapterType.orNull(),
		"image":                cfg.Image,
		"snapshot":             cfg.Snapshot,
		"target":               cfg.Target,
		"cpu":                  cfg.CPU,
		"memory":               cfg.Memory,
		"disk":                 cfg.Disk,
		"gpu":                  cfg.GPU,
	}
	if !id.executionWorkspaceID.truthy() {
		identity["projectlessIssueId"] = id.issueID.stable()
	}
	sum := sha256.Sum256([]byte(js.StableStringify(identity)))
	return hex.EncodeToString(sum[:]), true
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// sentinelFile renders the sentinel file as the plugin writes it:
// JSON.stringify(…, null, 2), members in the plugin's order, each value as
// the host sent it (null written as null), undefined members left out.
func sentinelFile(id sentinelIdentity, token string, now time.Time) []byte {
	obj := js.NewObject()
	add := obj.Set
	addMember := func(k string, m jsMember) {
		if m.present {
			add(k, m.v)
		}
	}
	add("version", json.Number("1"))
	add("token", token)
	addMember("companyId", id.companyID)
	addMember("environmentId", id.environmentID)
	addMember("agentId", id.agentID)
	addMember("executionWorkspaceId", id.executionWorkspaceID)
	if !id.executionWorkspaceID.truthy() {
		addMember("projectlessIssueId", id.issueID)
	}
	add("adapterType", id.adapterType.orNull())
	add("provider", providerName)
	add("writtenAt", js.ISOString(now))
	return []byte(js.StringifyIndent(obj))
}

// writeSentinel is the plugin's writeWorkspaceSentinel.
func writeSentinel(ctx context.Context, tb *daytona.Toolbox, remoteCwd string, id sentinelIdentity, cfg config.Driver, now time.Time) (sentinel, error) {
	sp := sentinelPath(remoteCwd)
	token, ok := sentinelToken(id, cfg)
	if !ok {
		return sentinel{Path: sp, Result: sentinelResultSkipped}, nil
	}
	if err := tb.CreateFolder(ctx, path.Dir(sp), "755"); err != nil {
		return sentinel{}, err
	}
	if err := tb.UploadFile(ctx, sp, bytes.NewReader(sentinelFile(id, token, now))); err != nil {
		return sentinel{}, err
	}
	return sentinel{Path: sp, Token: &token, Result: sentinelResultWritten}, nil
}

// verifySentinel is the plugin's verifyWorkspaceSentinel: the token the host
// stored must be in the sandbox's sentinel file.
func verifySentinel(ctx context.Context, tb *daytona.Toolbox, remoteCwd string, leaseMetadata map[string]any, timeoutSecs float64) (sentinel, error) {
	stored, _ := leaseMetadata["workspaceSentinel"].(map[string]any)
	sp := sentinelPath(remoteCwd)
	if p, ok := stored["path"].(string); ok {
		sp = p
	}
	expected, ok := stored["token"].(string)
	if !ok {
		return sentinel{Path: sp, Result: sentinelResultMissing}, nil
	}
	res, err := tb.Execute(ctx, daytona.ExecuteRequest{Command: "cat " + shell.Quote(sp), TimeoutSeconds: timeoutSecs})
	if err != nil {
		return sentinel{}, err
	}
	out := sentinel{Path: sp, Token: &expected, Result: sentinelResultMissing}
	if res.ExitCode != 0 {
		return out, nil
	}
	var file struct {
		Token *string `json:"token"`
	}
	if json.Unmarshal([]byte(res.Result), &file) == nil && file.Token != nil && *file.Token == expected {
		out.Result = sentinelResultMatched
	} else {
		out.Result = sentinelResultMismatched
	}
	return out, nil
}

// leaseMetadataInput feeds leaseMetadata.
type leaseMetadataInput struct {
	raw              config.Raw // the config as the host sent it
	cfg              config.Driver
	sandbox          *daytona.Sandbox
	shellCommand     string
	remoteCwd        string
	resumed          bool
	resumedFromState string
	sandboxState     string
	sentinel         *sentinel
}

// leaseMetadata is the plugin's leaseMetadata: exactly its keys. It never
// carries pluginId, agentId or a config key with a changed value (the host
// merges it over its own keys).
func leaseMetadata(in leaseMetadataInput) map[string]any {
	state := in.sandboxState
	if state == "" {
		state = string(in.sandbox.State)
	}
	m := map[string]any{
		"provider":     providerName,
		"shellCommand": in.shellCommand,
		"sandboxId":    in.sandbox.ID,
		"sandboxName":  in.sandbox.Name,
		"sandboxState": nilIfEmpty(state),
		"image":        in.cfg.Image,
		"snapshot":     in.cfg.Snapshot,
		"target":       nilIfEmpty(in.sandbox.Target),
		"timeoutMs":    in.cfg.TimeoutMs,
		"reuseLease":   in.cfg.ReuseLease,
		"remoteCwd":    in.remoteCwd,
		"resumedLease": in.resumed,
	}
	if in.cfg.ArchiveOnRelease {
		m["archiveOnRelease"] = true
	}
	if in.resumed {
		m["resumedFromState"] = nilIfEmpty(in.resumedFromState)
	}
	for k, v := range map[string]*float64{"cpu": in.cfg.CPU, "memory": in.cfg.Memory, "disk": in.cfg.Disk, "gpu": in.cfg.GPU} {
		if v != nil {
			m[k] = *v
		}
	}
	if in.sentinel != nil {
		m["workspaceSentinel"] = in.sentinel
	}
	dropChangedConfigKeys(m, in.raw)
	return m
}

// configKeys are the metadata keys that are also config keys. The host
// spreads the worker's metadata over the stored config, rebuilds the config
// of later calls from it and compares it when looking for a reusable lease:
// a config key the worker normalised (a trimmed image, a default timeoutMs,
// a region filled in for an omitted target, null for an absent snapshot)
// would change the config and stop the lease from ever matching again. The
// reference returns them all; here each is kept only when it equals what the
// host sent.
var configKeys = []string{"image", "snapshot", "target", "timeoutMs", "reuseLease", "archiveOnRelease", "cpu", "memory", "disk", "gpu"}

func dropChangedConfigKeys(m map[string]any, raw config.Raw) {
	for _, k := range configKeys {
		v, ours := m[k]
		if !ours {
			continue
		}
		sent, present := raw[k]
		if !present || !sameJSON(v, sent) {
			delete(m, k)
		}
	}
}

// sameJSON compares two values by their canonical JSON.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	ca, okA := canonicalJSON(ja)
	cb, okB := canonicalJSON(jb)
	return okA && okB && bytes.Equal(ca, cb)
}
