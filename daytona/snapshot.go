package daytona

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// SnapshotState is the state of a snapshot ("active" is usable).
type SnapshotState string

// Snapshot states.
const (
	SnapshotBuilding     SnapshotState = "building"
	SnapshotPending      SnapshotState = "pending"
	SnapshotPulling      SnapshotState = "pulling"
	SnapshotSnapshotting SnapshotState = "snapshotting"
	SnapshotActive       SnapshotState = "active"
	SnapshotInactive     SnapshotState = "inactive"
	SnapshotError        SnapshotState = "error"
	SnapshotBuildFailed  SnapshotState = "build_failed"
	SnapshotRemoving     SnapshotState = "removing"
)

// Snapshot is a reusable sandbox image. Mem and Disk are GiB (the API calls
// memory "mem" here).
type Snapshot struct {
	ID              string        `json:"id"`
	OrganizationID  string        `json:"organizationId,omitempty"`
	General         bool          `json:"general"`
	Name            string        `json:"name"`
	ImageName       string        `json:"imageName,omitempty"`
	State           SnapshotState `json:"state"`
	Size            *float64      `json:"size"`
	Entrypoint      []string      `json:"entrypoint"`
	CPU             float64       `json:"cpu"`
	GPU             float64       `json:"gpu"`
	Mem             float64       `json:"mem"`
	Disk            float64       `json:"disk"`
	ErrorReason     string        `json:"errorReason,omitempty"`
	CreatedAt       string        `json:"createdAt,omitempty"`
	UpdatedAt       string        `json:"updatedAt,omitempty"`
	LastUsedAt      string        `json:"lastUsedAt,omitempty"`
	Ref             string        `json:"ref,omitempty"`
	SourceSandboxID string        `json:"sourceSandboxId,omitempty"`
	RegionIDs       []string      `json:"regionIds,omitempty"`
	SandboxClass    string        `json:"sandboxClass,omitempty"`
}

// CreateSnapshotFromSandbox starts capturing the sandbox's filesystem as a
// snapshot named name. The sandbox reports "snapshotting" meanwhile; see
// CreateSnapshotFromSandboxAndWait.
func (c *Client) CreateSnapshotFromSandbox(ctx context.Context, id, name string) (*Sandbox, error) {
	if id == "" || name == "" {
		return nil, errors.New("daytona: snapshot: sandbox ID and snapshot name are required")
	}
	if err := checkSegment("snapshot", id); err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := c.sendJSON(ctx, http.MethodPost, c.apiEndpoint("sandbox", id, "snapshot"), map[string]any{"name": name}, &sb); err != nil {
		return nil, err
	}
	if sb.ID == "" {
		return nil, nil
	}
	return &sb, nil
}

// WaitSnapshotDone waits (within timeout; <= 0: only ctx bounds it) until the
// sandbox has left the snapshotting state, as the SDK's createSnapshot does.
// It fails with a *SandboxStateError when the sandbox ends in error or
// build_failed, and with a *WaitTimeoutError when time runs out. Leaving the
// state does not prove the snapshot exists: Daytona restores the sandbox's
// state before it records the snapshot, and also when the job failed.
func (c *Client) WaitSnapshotDone(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	return c.waitForState(ctx, id, timeout, waitSnapshotDone)
}

// CreateSnapshotFromSandboxAndWait creates the snapshot and waits until the
// sandbox has left the snapshotting state.
func (c *Client) CreateSnapshotFromSandboxAndWait(ctx context.Context, id, name string, timeout time.Duration) (*Sandbox, error) {
	start := c.clock.Now()
	sb, err := c.CreateSnapshotFromSandbox(ctx, id, name)
	if err != nil {
		return nil, err
	}
	if sb != nil && waitSnapshotDone.reached(sb.State) {
		return sb, nil
	}
	return c.waitForState(ctx, id, remaining(timeout, start, c.clock.Now()), waitSnapshotDone)
}

// GetSnapshot fetches a snapshot by ID or name.
func (c *Client) GetSnapshot(ctx context.Context, idOrName string) (*Snapshot, error) {
	if err := checkSegment("snapshot", idOrName); err != nil {
		return nil, err
	}
	var s Snapshot
	if err := c.getJSON(ctx, c.apiEndpoint("snapshots", idOrName), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSnapshot deletes a snapshot given its ID or name. The API only
// deletes by UUID, so the snapshot is looked up first.
func (c *Client) DeleteSnapshot(ctx context.Context, idOrName string) error {
	s, err := c.GetSnapshot(ctx, idOrName)
	if err != nil {
		return err
	}
	return c.DeleteSnapshotByID(ctx, s.ID)
}

// DeleteSnapshotByID deletes the snapshot with that UUID (Daytona marks it
// removing and drops it soon after).
func (c *Client) DeleteSnapshotByID(ctx context.Context, id string) error {
	if err := checkSegment("snapshot", id); err != nil {
		return err
	}
	return c.sendJSON(ctx, http.MethodDelete, c.apiEndpoint("snapshots", id), nil, nil)
}
