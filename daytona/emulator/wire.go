package emulator

import (
	"encoding/json"
	"net/http"
	"time"
)

// The emulator's own wire types. They follow @daytonaio/api-client 0.220.0 and
// @daytona/toolbox-api-client 0.218.0 field for field; they are deliberately not
// shared with the client package so a client-side mistake cannot hide here.

// isoTime renders t the way JavaScript's toISOString does: UTC, milliseconds, Z.
func isoTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

type volumeJSON struct {
	VolumeID  string `json:"volumeId"`
	MountPath string `json:"mountPath"`
	Subpath   string `json:"subpath,omitempty"`
}

type buildInfoJSON struct {
	DockerfileContent string   `json:"dockerfileContent,omitempty"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
	CreatedAt         string   `json:"createdAt"`
	UpdatedAt         string   `json:"updatedAt"`
	SnapshotRef       string   `json:"snapshotRef"`
}

// sandboxJSON is the full Sandbox DTO (GET /sandbox/{id} and lifecycle replies).
type sandboxJSON struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	Kvm                 bool              `json:"kvm"`
	NetworkAllowList    *string           `json:"networkAllowList,omitempty"`
	DomainAllowList     *string           `json:"domainAllowList,omitempty"`
	Target              string            `json:"target"`
	CPU                 int               `json:"cpu"`
	GPU                 int               `json:"gpu"`
	Memory              int               `json:"memory"`
	Disk                int               `json:"disk"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	ErrorReason         *string           `json:"errorReason"`
	Recoverable         bool              `json:"recoverable"`
	BackupState         string            `json:"backupState"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoPauseInterval   int               `json:"autoPauseInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	AutoDestroyAt       string            `json:"autoDestroyAt,omitempty"`
	Volumes             []volumeJSON      `json:"volumes"`
	BuildInfo           *buildInfoJSON    `json:"buildInfo,omitempty"`
	CreatedAt           string            `json:"createdAt"`
	UpdatedAt           string            `json:"updatedAt"`
	LastActivityAt      string            `json:"lastActivityAt"`
	SandboxClass        string            `json:"sandboxClass"`
	DaemonVersion       string            `json:"daemonVersion"`
	RunnerID            string            `json:"runnerId"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

// sandboxListItemJSON is what GET /sandbox lists: the DTO without env, kvm,
// volumes, buildInfo, backupCreatedAt, linkedSandboxId and the proxy fields.
type sandboxListItemJSON struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Target              string            `json:"target"`
	RunnerID            string            `json:"runnerId"`
	SandboxClass        string            `json:"sandboxClass"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user"`
	ErrorReason         *string           `json:"errorReason"`
	Recoverable         bool              `json:"recoverable"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    *string           `json:"networkAllowList,omitempty"`
	DomainAllowList     *string           `json:"domainAllowList,omitempty"`
	CPU                 int               `json:"cpu"`
	GPU                 int               `json:"gpu"`
	Memory              int               `json:"memory"`
	Disk                int               `json:"disk"`
	Labels              map[string]string `json:"labels"`
	BackupState         string            `json:"backupState"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoPauseInterval   int               `json:"autoPauseInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	AutoDestroyAt       string            `json:"autoDestroyAt,omitempty"`
	CreatedAt           string            `json:"createdAt"`
	UpdatedAt           string            `json:"updatedAt"`
	LastActivityAt      string            `json:"lastActivityAt"`
	DaemonVersion       string            `json:"daemonVersion"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

type listSandboxesJSON struct {
	Items      []sandboxListItemJSON `json:"items"`
	NextCursor *string               `json:"nextCursor"`
}

// createSandboxJSON is the CreateSandbox request. Pointers tell "absent" from zero.
type createSandboxJSON struct {
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    *string           `json:"networkAllowList"`
	DomainAllowList     *string           `json:"domainAllowList"`
	Target              string            `json:"target"`
	CPU                 *int              `json:"cpu"`
	GPU                 *int              `json:"gpu"`
	Memory              *int              `json:"memory"`
	Disk                *int              `json:"disk"`
	AutoStopInterval    *int              `json:"autoStopInterval"`
	AutoPauseInterval   *int              `json:"autoPauseInterval"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval"`
	TTLMinutes          *int              `json:"ttlMinutes"`
	Volumes             []volumeJSON      `json:"volumes"`
	BuildInfo           *struct {
		DockerfileContent string   `json:"dockerfileContent"`
		ContextHashes     []string `json:"contextHashes"`
	} `json:"buildInfo"`
}

type snapshotJSON struct {
	ID              string   `json:"id"`
	OrganizationID  string   `json:"organizationId,omitempty"`
	General         bool     `json:"general"`
	Name            string   `json:"name"`
	ImageName       string   `json:"imageName,omitempty"`
	State           string   `json:"state"`
	Size            *float64 `json:"size"`
	Entrypoint      []string `json:"entrypoint"`
	CPU             int      `json:"cpu"`
	GPU             int      `json:"gpu"`
	Mem             int      `json:"mem"`
	Disk            int      `json:"disk"`
	ErrorReason     *string  `json:"errorReason"`
	CreatedAt       string   `json:"createdAt"`
	UpdatedAt       string   `json:"updatedAt"`
	LastUsedAt      *string  `json:"lastUsedAt"`
	RegionIDs       []string `json:"regionIds,omitempty"`
	Ref             string   `json:"ref,omitempty"`
	SourceSandboxID *string  `json:"sourceSandboxId"`
	SandboxClass    string   `json:"sandboxClass"`
}

type sshAccessJSON struct {
	ID         string `json:"id"`
	SandboxID  string `json:"sandboxId"`
	Token      string `json:"token"`
	ExpiresAt  string `json:"expiresAt"`
	CreatedAt  string `json:"createdAt"`
	UpdatedAt  string `json:"updatedAt"`
	SSHCommand string `json:"sshCommand"`
}

// Toolbox wire types.

type fileInfoJSON struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	ModTime     string `json:"modTime"`
	ModifiedAt  string `json:"modifiedAt"`
	IsDir       bool   `json:"isDir"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	Permissions string `json:"permissions"`
	Path        string `json:"path,omitempty"`
}

type commandJSON struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

type sessionJSON struct {
	SessionID string        `json:"sessionId"`
	Commands  []commandJSON `json:"commands"`
}

// sessionExecJSON always carries every key; unset pointers are null, as in the
// daemon (no omitempty).
type sessionExecJSON struct {
	CmdID    string  `json:"cmdId"`
	Output   *string `json:"output"`
	Stdout   *string `json:"stdout"`
	Stderr   *string `json:"stderr"`
	ExitCode *int    `json:"exitCode"`
}

type ptyInfoJSON struct {
	ID        string            `json:"id"`
	Cwd       string            `json:"cwd"`
	Envs      map[string]string `json:"envs"`
	Cols      uint16            `json:"cols"`
	Rows      uint16            `json:"rows"`
	CreatedAt string            `json:"createdAt"`
	Active    bool              `json:"active"`
	LazyStart bool              `json:"lazyStart"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "emulator: cannot encode response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
