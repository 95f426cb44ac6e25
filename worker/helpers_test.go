package worker

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/paperclipai/daytona-worker/protocol"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func acquireParamsForTest(company, env, agent string, ws, issue *string, adapter string) protocol.AcquireLeaseParams {
	p := protocol.AcquireLeaseParams{AgentID: agent, ExecutionWorkspaceID: ws, AdapterType: adapter}
	p.CompanyID, p.EnvironmentID, p.IssueID = company, env, issue
	return p
}
