package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SandboxState is the state the control plane reports. Unknown values are
// kept as they are.
type SandboxState string

// Sandbox states (api-client 0.220.0).
const (
	StateCreating         SandboxState = "creating"
	StateRestoring        SandboxState = "restoring"
	StateDestroyed        SandboxState = "destroyed"
	StateDestroying       SandboxState = "destroying"
	StateStarted          SandboxState = "started"
	StateStopped          SandboxState = "stopped"
	StateStarting         SandboxState = "starting"
	StateStopping         SandboxState = "stopping"
	StateError            SandboxState = "error"
	StateBuildFailed      SandboxState = "build_failed"
	StatePendingBuild     SandboxState = "pending_build"
	StateBuildingSnapshot SandboxState = "building_snapshot"
	StateUnknown          SandboxState = "unknown"
	StatePullingSnapshot  SandboxState = "pulling_snapshot"
	StateArchived         SandboxState = "archived"
	StateArchiving        SandboxState = "archiving"
	StateResizing         SandboxState = "resizing"
	StateSnapshotting     SandboxState = "snapshotting"
	StateForking          SandboxState = "forking"
	StatePausing          SandboxState = "pausing"
	StatePaused           SandboxState = "paused"
	StateResuming         SandboxState = "resuming"
)

// Failed reports whether s is a terminal failure state.
func (s SandboxState) Failed() bool { return s == StateError || s == StateBuildFailed }

// LanguageLabel is the label the SDKs use to record the code-run language.
const LanguageLabel = "code-toolbox-language"

// The code-toolbox languages, in the SDK's order (its error message lists
// them so); a sandbox created without one gets LanguagePython.
const LanguagePython = "python"

// Languages are the code-toolbox languages Daytona supports.
var Languages = []string{LanguagePython, "typescript", "javascript"}

// Sandbox is the control plane's view of a sandbox. Timestamps are kept as
// the ISO-8601 strings the API sends. List results leave Env, Volumes and
// BuildInfo empty.
type Sandbox struct {
	ID               string            `json:"id"`
	OrganizationID   string            `json:"organizationId"`
	Name             string            `json:"name"`
	Snapshot         string            `json:"snapshot,omitempty"`
	User             string            `json:"user"`
	Env              map[string]string `json:"env,omitempty"`
	Labels           map[string]string `json:"labels"`
	Public           bool              `json:"public"`
	NetworkBlockAll  bool              `json:"networkBlockAll"`
	NetworkAllowList string            `json:"networkAllowList,omitempty"`
	DomainAllowList  string            `json:"domainAllowList,omitempty"`
	Target           string            `json:"target"`
	CPU              float64           `json:"cpu"`
	GPU              float64           `json:"gpu"`
	Memory           float64           `json:"memory"`
	Disk             float64           `json:"disk"`
	State            SandboxState      `json:"state,omitempty"`
	DesiredState     string            `json:"desiredState,omitempty"`
	ErrorReason      string            `json:"errorReason,omitempty"`
	Recoverable      bool              `json:"recoverable,omitempty"`
	BackupState      string            `json:"backupState,omitempty"`
	// Intervals are minutes. AutoDeleteInterval < 0 disables auto-delete and
	// 0 deletes on stop.
	AutoStopInterval    int             `json:"autoStopInterval"`
	AutoArchiveInterval int             `json:"autoArchiveInterval"`
	AutoDeleteInterval  int             `json:"autoDeleteInterval"`
	AutoDestroyAt       string          `json:"autoDestroyAt,omitempty"`
	Volumes             []SandboxVolume `json:"volumes,omitempty"`
	BuildInfo           *BuildInfo      `json:"buildInfo,omitempty"`
	CreatedAt           string          `json:"createdAt,omitempty"`
	UpdatedAt           string          `json:"updatedAt,omitempty"`
	LastActivityAt      string          `json:"lastActivityAt,omitempty"`
	SandboxClass        string          `json:"sandboxClass,omitempty"`
	DaemonVersion       string          `json:"daemonVersion,omitempty"`
	RunnerID            string          `json:"runnerId,omitempty"`
	ToolboxProxyURL     string          `json:"toolboxProxyUrl"`
}

// AutoDestroyTime parses AutoDestroyAt (set once a TTL is configured).
func (s *Sandbox) AutoDestroyTime() (time.Time, bool) {
	if s == nil || s.AutoDestroyAt == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s.AutoDestroyAt)
	return t, err == nil
}

// SandboxVolume is a volume mount.
type SandboxVolume struct {
	VolumeID  string `json:"volumeId"`
	MountPath string `json:"mountPath"`
	Subpath   string `json:"subpath,omitempty"`
}

// BuildInfo describes an image-built sandbox.
type BuildInfo struct {
	DockerfileContent string   `json:"dockerfileContent,omitempty"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
	SnapshotRef       string   `json:"snapshotRef,omitempty"`
	CreatedAt         string   `json:"createdAt,omitempty"`
	UpdatedAt         string   `json:"updatedAt,omitempty"`
}

// Resources are requested with an image only; a snapshot fixes its own.
// Memory and Disk are GiB. A nil field is left to the server; a set one is
// sent as the number it is, fraction or zero, as the SDK sends it, and
// Daytona judges it.
type Resources struct {
	CPU    *float64
	GPU    *float64
	Memory *float64
	Disk   *float64
}

// CreateParams describe a new sandbox. Set at most one of Image and Snapshot;
// with neither the server's default snapshot is used.
type CreateParams struct {
	Name string
	// Image is a container image; it is sent as a one-line Dockerfile
	// ("FROM <image>\n") like the TypeScript SDK does.
	Image string
	// Snapshot is a snapshot name or ID.
	Snapshot string
	// Language ("python", "javascript" or "typescript"), when set, is stored
	// as the code-toolbox-language label (the official SDKs default it to
	// "python").
	Language string
	User     string
	Env      map[string]string
	Labels   map[string]string
	// Resources require Image.
	Resources        *Resources
	Public           bool
	NetworkBlockAll  bool
	NetworkAllowList string
	DomainAllowList  string
	// Intervals are in minutes, sent as the numbers they are (even a
	// config's 1e20, as the SDK sends it; Daytona refuses what it cannot
	// hold). nil leaves the server default (auto-stop 15, auto-archive 7
	// days, auto-delete disabled).
	AutoStopInterval    *float64
	AutoArchiveInterval *float64
	AutoDeleteInterval  *float64
	// Ephemeral deletes the sandbox when it stops (auto-delete interval 0).
	Ephemeral bool
	// TTLMinutes destroys the sandbox this long after creation, whatever its
	// state; nil leaves it unset.
	TTLMinutes *int
	Volumes    []SandboxVolume
	// Target overrides Config.Target for this sandbox.
	Target string
}

// createBody is the wire form of POST /sandbox.
type createBody struct {
	Name                string            `json:"name,omitempty"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user,omitempty"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels,omitempty"`
	Public              bool              `json:"public,omitempty"`
	NetworkBlockAll     bool              `json:"networkBlockAll,omitempty"`
	NetworkAllowList    string            `json:"networkAllowList,omitempty"`
	DomainAllowList     string            `json:"domainAllowList,omitempty"`
	Target              string            `json:"target,omitempty"`
	CPU                 *float64          `json:"cpu,omitempty"`
	GPU                 *float64          `json:"gpu,omitempty"`
	Memory              *float64          `json:"memory,omitempty"`
	Disk                *float64          `json:"disk,omitempty"`
	AutoStopInterval    *float64          `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *float64          `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *float64          `json:"autoDeleteInterval,omitempty"`
	TTLMinutes          *int              `json:"ttlMinutes,omitempty"`
	Volumes             []SandboxVolume   `json:"volumes,omitempty"`
	BuildInfo           *createBuildInfo  `json:"buildInfo,omitempty"`
}

type createBuildInfo struct {
	DockerfileContent string `json:"dockerfileContent"`
}

func (c *Client) createBody(p CreateParams) (*createBody, error) {
	if p.Image != "" && p.Snapshot != "" {
		return nil, &InvalidArgumentError{Message: "daytona: create: set either Image or Snapshot, not both"}
	}
	// The SDK's checks, in its order: every sandbox carries its
	// code-toolbox language (python unless one is given).
	language := p.Language
	if language == "" {
		language = LanguagePython
	}
	if !slices.Contains(Languages, language) {
		return nil, &InvalidArgumentError{Arg: "language", Value: language,
			Message: fmt.Sprintf("daytona: create: unsupported language %q (supported: %s)", language, strings.Join(Languages, ", "))}
	}
	var ttl *float64
	if p.TTLMinutes != nil {
		ttl = new(float64(*p.TTLMinutes))
	}
	for _, v := range []struct {
		name  string
		value *float64
	}{{"autoStopInterval", p.AutoStopInterval}, {"autoArchiveInterval", p.AutoArchiveInterval}, {"ttlMinutes", ttl}} {
		if v.value != nil && (*v.value < 0 || *v.value != math.Trunc(*v.value) || math.IsInf(*v.value, 0)) {
			return nil, &InvalidArgumentError{Arg: v.name, Value: strconv.FormatFloat(*v.value, 'g', -1, 64),
				Message: "daytona: create: " + v.name + " must be a non-negative integer"}
		}
	}
	if p.Resources != nil && p.Image == "" {
		return nil, &InvalidArgumentError{Message: "daytona: create: Resources require Image (a snapshot fixes its own resources)"}
	}
	b := &createBody{
		Name:                p.Name,
		Snapshot:            p.Snapshot,
		User:                p.User,
		Env:                 p.Env,
		Public:              p.Public,
		NetworkBlockAll:     p.NetworkBlockAll,
		NetworkAllowList:    p.NetworkAllowList,
		DomainAllowList:     p.DomainAllowList,
		Target:              p.Target,
		AutoStopInterval:    p.AutoStopInterval,
		AutoArchiveInterval: p.AutoArchiveInterval,
		AutoDeleteInterval:  p.AutoDeleteInterval,
		TTLMinutes:          p.TTLMinutes,
		Volumes:             p.Volumes,
	}
	if b.Env == nil {
		b.Env = map[string]string{}
	}
	if b.Target == "" {
		b.Target = c.target
	}
	if p.Ephemeral {
		b.AutoDeleteInterval = new(0.0)
	}
	b.Labels = make(map[string]string, len(p.Labels)+1)
	for k, v := range p.Labels {
		b.Labels[k] = v
	}
	b.Labels[LanguageLabel] = language
	if p.Image != "" {
		b.BuildInfo = &createBuildInfo{DockerfileContent: "FROM " + p.Image + "\n"}
	}
	if r := p.Resources; r != nil {
		b.CPU, b.GPU, b.Memory, b.Disk = r.CPU, r.GPU, r.Memory, r.Disk
	}
	return b, nil
}

// Create sends POST /sandbox and returns the sandbox as the server answered,
// which may still be creating. See CreateAndWait.
func (c *Client) Create(ctx context.Context, p CreateParams) (*Sandbox, error) {
	body, err := c.createBody(p)
	if err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := c.sendJSON(ctx, http.MethodPost, c.apiEndpoint("sandbox"), body, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// CreateAndWait creates a sandbox and waits until it is started, within
// timeout (<= 0: only ctx bounds the wait). When the sandbox was created but
// the wait fails, the last known sandbox is returned with the error so that
// the caller can delete it.
func (c *Client) CreateAndWait(ctx context.Context, p CreateParams, timeout time.Duration) (*Sandbox, error) {
	start := c.clock.Now()
	sb, err := c.Create(ctx, p)
	if err != nil {
		return nil, err
	}
	if sb.State == StateStarted {
		return sb, nil
	}
	if sb.State.Failed() {
		return sb, &SandboxStateError{SandboxID: sb.ID, State: sb.State, Reason: sb.ErrorReason, Recoverable: sb.Recoverable, Target: []SandboxState{StateStarted}}
	}
	got, err := c.waitForState(ctx, sb.ID, remaining(timeout, start, c.clock.Now()), waitStarted)
	if got == nil {
		got = sb
	}
	return got, err
}

// Get fetches a sandbox by ID or name.
func (c *Client) Get(ctx context.Context, idOrName string) (*Sandbox, error) {
	if err := checkSegment("get", idOrName); err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := c.getJSON(ctx, c.apiEndpoint("sandbox", idOrName), &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// ToolboxProxyURL asks the control plane for a sandbox's toolbox proxy base;
// only needed when a Sandbox arrived without ToolboxProxyURL.
func (c *Client) ToolboxProxyURL(ctx context.Context, sandboxID string) (string, error) {
	if err := checkSegment("toolbox proxy URL", sandboxID); err != nil {
		return "", err
	}
	var out struct {
		URL string `json:"url"`
	}
	if err := c.getJSON(ctx, c.apiEndpoint("sandbox", sandboxID, "toolbox-proxy-url"), &out); err != nil {
		return "", err
	}
	if out.URL == "" {
		return "", fmt.Errorf("daytona: sandbox %s: the control plane returned no toolbox proxy URL", sandboxID)
	}
	return out.URL, nil
}

// ListOptions filter GET /sandbox. Labels match by containment (every pair
// must be present).
type ListOptions struct {
	Labels map[string]string
	States []SandboxState
	// Name and ID match by case-insensitive prefix.
	Name string
	ID   string
	// Limit is the page size (1-200, server default 100).
	Limit int
	// Cursor continues from a previous page's NextCursor.
	Cursor string
	Sort   string
	Order  string
}

// SandboxPage is one page of List. NextCursor is empty on the last page.
type SandboxPage struct {
	Items      []Sandbox `json:"items"`
	NextCursor string    `json:"nextCursor"`
}

// List fetches one page of sandboxes.
func (c *Client) List(ctx context.Context, opts *ListOptions) (*SandboxPage, error) {
	u := c.apiEndpoint("sandbox")
	q := u.Query()
	if opts != nil {
		if len(opts.Labels) > 0 {
			b, err := json.Marshal(opts.Labels)
			if err != nil {
				return nil, fmt.Errorf("daytona: list: encode labels: %w", err)
			}
			q.Set("labels", string(b))
		}
		for _, s := range opts.States {
			q.Add("states", string(s))
		}
		setIf(q, "name", opts.Name)
		setIf(q, "id", opts.ID)
		setIf(q, "cursor", opts.Cursor)
		setIf(q, "sort", opts.Sort)
		setIf(q, "order", opts.Order)
		if opts.Limit > 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
	}
	u.RawQuery = q.Encode()
	var page SandboxPage
	if err := c.getJSON(ctx, u, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// ListAll iterates over every sandbox matching opts, fetching pages lazily.
// It stops at the first error, which it yields with a nil sandbox.
func (c *Client) ListAll(ctx context.Context, opts *ListOptions) iter.Seq2[*Sandbox, error] {
	return func(yield func(*Sandbox, error) bool) {
		var o ListOptions
		if opts != nil {
			o = *opts // copy: the caller's options are not mutated
		}
		seen := map[string]bool{}
		for {
			page, err := c.List(ctx, &o)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range page.Items {
				if !yield(&page.Items[i], nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			if seen[page.NextCursor] {
				yield(nil, fmt.Errorf("daytona: list: server repeated cursor %q", page.NextCursor))
				return
			}
			seen[page.NextCursor] = true
			o.Cursor = page.NextCursor
		}
	}
}

// lifecycle posts to /sandbox/{id}/{action} and decodes the sandbox reply.
func (c *Client) lifecycle(ctx context.Context, id, action string, query map[string]string) (*Sandbox, error) {
	if err := checkSegment(action, id); err != nil {
		return nil, err
	}
	u := c.apiEndpoint("sandbox", id, action)
	if len(query) > 0 {
		q := u.Query()
		for k, v := range query {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	var sb Sandbox
	if err := c.sendJSON(ctx, http.MethodPost, u, nil, &sb); err != nil {
		return nil, err
	}
	if sb.ID == "" {
		return nil, nil
	}
	return &sb, nil
}

// Start sends the start request. The reply may still be starting; see
// StartAndWait.
func (c *Client) Start(ctx context.Context, id string) (*Sandbox, error) {
	return c.lifecycle(ctx, id, "start", nil)
}

// StartAndWait starts the sandbox and waits until it is started.
func (c *Client) StartAndWait(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	start := c.clock.Now()
	sb, err := c.Start(ctx, id)
	if err != nil {
		return nil, err
	}
	if sb != nil && sb.State == StateStarted {
		return sb, nil
	}
	return c.waitForState(ctx, id, remaining(timeout, start, c.clock.Now()), waitStarted)
}

// StopOptions modify Stop.
type StopOptions struct {
	// Force kills the sandbox (SIGKILL) instead of stopping it gracefully.
	Force bool
}

// Stop sends the stop request; the reply is usually "stopping". An ephemeral
// sandbox is deleted instead of stopped.
func (c *Client) Stop(ctx context.Context, id string, opts *StopOptions) (*Sandbox, error) {
	var q map[string]string
	if opts != nil && opts.Force {
		q = map[string]string{"force": "true"}
	}
	return c.lifecycle(ctx, id, "stop", q)
}

// StopAndWait stops the sandbox and waits until it is stopped. A sandbox
// that disappears meanwhile (ephemeral: deleted on stop) counts as stopped
// and is returned with State "destroyed".
func (c *Client) StopAndWait(ctx context.Context, id string, opts *StopOptions, timeout time.Duration) (*Sandbox, error) {
	start := c.clock.Now()
	if _, err := c.Stop(ctx, id, opts); err != nil {
		return nil, err
	}
	return c.waitForState(ctx, id, remaining(timeout, start, c.clock.Now()), waitStopped)
}

// Archive moves a stopped sandbox to archive storage. The reply is usually
// "archiving"; the official SDKs do not wait for "archived".
func (c *Client) Archive(ctx context.Context, id string) (*Sandbox, error) {
	return c.lifecycle(ctx, id, "archive", nil)
}

// Recover restarts a sandbox in a recoverable error state.
func (c *Client) Recover(ctx context.Context, id string) (*Sandbox, error) {
	return c.lifecycle(ctx, id, "recover", nil)
}

// RecoverAndWait recovers the sandbox and waits until it is started.
func (c *Client) RecoverAndWait(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	start := c.clock.Now()
	sb, err := c.Recover(ctx, id)
	if err != nil {
		return nil, err
	}
	if sb != nil && sb.State == StateStarted {
		return sb, nil
	}
	return c.waitForState(ctx, id, remaining(timeout, start, c.clock.Now()), waitStarted)
}

// Delete sends DELETE /sandbox/{id}; deletion then proceeds asynchronously.
// Like the npm api-client 0.220.0, it sends no "force" parameter (the API
// has none for delete; Stop has one).
func (c *Client) Delete(ctx context.Context, id string) (*Sandbox, error) {
	if err := checkSegment("delete", id); err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := c.sendJSON(ctx, http.MethodDelete, c.apiEndpoint("sandbox", id), nil, &sb); err != nil {
		return nil, err
	}
	if sb.ID == "" {
		return nil, nil
	}
	return &sb, nil
}

// DeleteAndWait deletes the sandbox and waits until it is gone (GET answers
// 404 or the state is destroyed).
func (c *Client) DeleteAndWait(ctx context.Context, id string, timeout time.Duration) error {
	start := c.clock.Now()
	sb, err := c.Delete(ctx, id)
	if err != nil {
		return err
	}
	if sb != nil && sb.State == StateDestroyed {
		return nil
	}
	_, err = c.waitForState(ctx, id, remaining(timeout, start, c.clock.Now()), waitDestroyed)
	return err
}

// intervalSetter posts /sandbox/{id}/{kind}/{minutes} and returns the
// refreshed sandbox. The reply is 200 or 201 with or without a body, so the
// sandbox is re-read when the body does not carry it.
func (c *Client) intervalSetter(ctx context.Context, id, kind string, minutes int) (*Sandbox, error) {
	if err := checkSegment(kind, id); err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := c.sendJSON(ctx, http.MethodPost, c.apiEndpoint("sandbox", id, kind, strconv.Itoa(minutes)), nil, &sb); err != nil {
		return nil, err
	}
	if sb.ID != "" {
		return &sb, nil
	}
	return c.Get(ctx, id)
}

// SetAutoStopInterval sets minutes of inactivity before auto-stop (0 = never).
func (c *Client) SetAutoStopInterval(ctx context.Context, id string, minutes int) (*Sandbox, error) {
	if minutes < 0 {
		return nil, errors.New("daytona: auto-stop interval must not be negative")
	}
	return c.intervalSetter(ctx, id, "autostop", minutes)
}

// SetAutoArchiveInterval sets minutes stopped before auto-archive (0 = the
// organization maximum).
func (c *Client) SetAutoArchiveInterval(ctx context.Context, id string, minutes int) (*Sandbox, error) {
	if minutes < 0 {
		return nil, errors.New("daytona: auto-archive interval must not be negative")
	}
	return c.intervalSetter(ctx, id, "autoarchive", minutes)
}

// SetAutoDeleteInterval sets minutes stopped before auto-delete (negative =
// never, 0 = on stop).
func (c *Client) SetAutoDeleteInterval(ctx context.Context, id string, minutes int) (*Sandbox, error) {
	return c.intervalSetter(ctx, id, "autodelete", minutes)
}

// SetTTL sets the sandbox's time to live in minutes from now (0 disables it),
// after which it is destroyed whatever its state. It then re-reads the
// sandbox, whose AutoDestroyAt carries the resulting deadline.
func (c *Client) SetTTL(ctx context.Context, id string, minutes int) (*Sandbox, error) {
	if minutes < 0 {
		return nil, errors.New("daytona: TTL must not be negative")
	}
	if err := checkSegment("ttl", id); err != nil {
		return nil, err
	}
	if err := c.sendJSON(ctx, http.MethodPost, c.apiEndpoint("sandbox", id, "ttl", strconv.Itoa(minutes)), nil, nil); err != nil {
		return nil, err
	}
	return c.Get(ctx, id)
}

// ReplaceLabels replaces all labels of the sandbox and returns the stored set.
func (c *Client) ReplaceLabels(ctx context.Context, id string, labels map[string]string) (map[string]string, error) {
	if err := checkSegment("labels", id); err != nil {
		return nil, err
	}
	if labels == nil {
		labels = map[string]string{}
	}
	var out struct {
		Labels map[string]string `json:"labels"`
	}
	if err := c.sendJSON(ctx, http.MethodPut, c.apiEndpoint("sandbox", id, "labels"), map[string]any{"labels": labels}, &out); err != nil {
		return nil, err
	}
	return out.Labels, nil
}

// SSHAccess is a token for the SSH gateway. Creating one revokes the
// sandbox's previous tokens. String redacts the token.
type SSHAccess struct {
	ID         string `json:"id"`
	SandboxID  string `json:"sandboxId"`
	Token      string `json:"token"`
	ExpiresAt  string `json:"expiresAt"`
	CreatedAt  string `json:"createdAt"`
	UpdatedAt  string `json:"updatedAt"`
	SSHCommand string `json:"sshCommand"`
}

func (a SSHAccess) String() string {
	return fmt.Sprintf("SSHAccess{ID:%s SandboxID:%s ExpiresAt:%s Token:REDACTED}", a.ID, a.SandboxID, a.ExpiresAt)
}

// CreateSSHAccess creates an SSH token valid for expiresInMinutes (<= 0: the
// server default of 60).
func (c *Client) CreateSSHAccess(ctx context.Context, id string, expiresInMinutes int) (*SSHAccess, error) {
	if err := checkSegment("ssh access", id); err != nil {
		return nil, err
	}
	u := c.apiEndpoint("sandbox", id, "ssh-access")
	if expiresInMinutes > 0 {
		u.RawQuery = "expiresInMinutes=" + strconv.Itoa(expiresInMinutes)
	}
	var a SSHAccess
	if err := c.sendJSON(ctx, http.MethodPost, u, nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// RevokeSSHAccess revokes token, or every token of the sandbox when token is
// empty.
func (c *Client) RevokeSSHAccess(ctx context.Context, id, token string) error {
	if err := checkSegment("ssh access", id); err != nil {
		return err
	}
	u := c.apiEndpoint("sandbox", id, "ssh-access")
	if token != "" {
		q := u.Query()
		q.Set("token", token)
		u.RawQuery = q.Encode()
	}
	return c.sendJSON(ctx, http.MethodDelete, u, nil, nil)
}

// PreviewLink is the URL of a sandbox port and the token that opens it
// (header X-Daytona-Preview-Token). String redacts the token.
type PreviewLink struct {
	SandboxID string `json:"sandboxId"`
	URL       string `json:"url"`
	Token     string `json:"token"`
}

func (p PreviewLink) String() string {
	return fmt.Sprintf("PreviewLink{SandboxID:%s URL:%s Token:REDACTED}", p.SandboxID, p.URL)
}

// PreviewLink returns the preview URL and token for a port of the sandbox.
func (c *Client) PreviewLink(ctx context.Context, id string, port int) (*PreviewLink, error) {
	if err := checkSegment("preview link", id); err != nil {
		return nil, err
	}
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("daytona: preview link: invalid port %d", port)
	}
	var p PreviewLink
	if err := c.getJSON(ctx, c.apiEndpoint("sandbox", id, "ports", strconv.Itoa(port), "preview-url"), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func setIf(q map[string][]string, k, v string) {
	if v != "" {
		q[k] = []string{v}
	}
}

// remaining is what is left of timeout (<= 0: unlimited) since start. A
// budget used up leaves 1 ns, not 0 (unlimited): the wait then sends only
// its final refresh, as the SDK's 1 ms clamp does.
func remaining(timeout time.Duration, start, now time.Time) time.Duration {
	if timeout <= 0 {
		return 0
	}
	left := timeout - now.Sub(start)
	if left <= 0 {
		return time.Nanosecond
	}
	return left
}
