package protocol

// Host→worker methods. The first three are required of every worker; the rest
// are optional and only called when the worker lists them in supportedMethods.
const (
	MethodInitialize = "initialize"
	MethodHealth     = "health"
	MethodShutdown   = "shutdown"

	MethodValidateConfig         = "validateConfig"
	MethodConfigChanged          = "configChanged"
	MethodOnEvent                = "onEvent"
	MethodRunJob                 = "runJob"
	MethodHandleWebhook          = "handleWebhook"
	MethodHandleAPIRequest       = "handleApiRequest"
	MethodGetData                = "getData"
	MethodPerformAction          = "performAction"
	MethodExecuteTool            = "executeTool"
	MethodDetectExternalObjects  = "detectExternalObjects"
	MethodRouteAIConnection      = "routeAiConnection"
	MethodResolveExternalObject  = "resolveExternalObject"
	MethodRefreshExternalObjects = "refreshExternalObjects"

	MethodEnvironmentValidateConfig         = "environmentValidateConfig"
	MethodEnvironmentProbe                  = "environmentProbe"
	MethodEnvironmentAcquireLease           = "environmentAcquireLease"
	MethodEnvironmentResumeLease            = "environmentResumeLease"
	MethodEnvironmentReleaseLease           = "environmentReleaseLease"
	MethodEnvironmentStopLease              = "environmentStopLease"
	MethodEnvironmentDestroyLease           = "environmentDestroyLease"
	MethodEnvironmentRealizeWorkspace       = "environmentRealizeWorkspace"
	MethodEnvironmentExecute                = "environmentExecute"
	MethodEnvironmentRunnerIngressEndpoint  = "environmentRunnerIngressEndpoint"
	MethodEnvironmentSyncIn                 = "environmentSyncIn"
	MethodEnvironmentSyncOut                = "environmentSyncOut"
	MethodEnvironmentStartInteractiveSetup  = "environmentStartInteractiveSetup"
	MethodEnvironmentGetInteractiveSetup    = "environmentGetInteractiveSetup"
	MethodEnvironmentCaptureTemplate        = "environmentCaptureTemplate"
	MethodEnvironmentCancelInteractiveSetup = "environmentCancelInteractiveSetup"
	MethodEnvironmentDeleteTemplate         = "environmentDeleteTemplate"

	MethodLoginPtyOpen  = "loginPtyOpen"
	MethodLoginPtyInput = "loginPtyInput"
	MethodLoginPtyStop  = "loginPtyStop"
	MethodLoginPtyClose = "loginPtyClose"

	MethodDuplexChannelOpen  = "duplexChannelOpen"
	MethodDuplexChannelWrite = "duplexChannelWrite"
	MethodDuplexChannelStop  = "duplexChannelStop"
	MethodDuplexChannelClose = "duplexChannelClose"
)

// Worker→host notifications (no id, no reply) and calls.
const (
	NotifyLog               = "log"
	NotifyExecuteLog        = "execute.log"
	NotifyLoginPtyOutput    = "loginPty.output"
	NotifyLoginPtyExit      = "loginPty.exit"
	NotifyDuplexChannelData = "duplexChannel.data"
	NotifyDuplexChannelExit = "duplexChannel.exit"

	CallSpanRecord = "span.record"
)

// SupportedMethods returns the exact list the Daytona worker answers
// `initialize` with, in the order the official worker runtime builds it. The
// host treats this list as the source of truth for which optional RPCs it
// calls and which sandbox capabilities it grants, so it must not drift.
func SupportedMethods() []string {
	return []string{
		MethodHealth,
		MethodShutdown,
		MethodEnvironmentValidateConfig,
		MethodEnvironmentProbe,
		MethodEnvironmentAcquireLease,
		MethodEnvironmentResumeLease,
		MethodEnvironmentReleaseLease,
		MethodEnvironmentStopLease,
		MethodEnvironmentDestroyLease,
		MethodEnvironmentRealizeWorkspace,
		MethodEnvironmentExecute,
		MethodEnvironmentRunnerIngressEndpoint,
		MethodEnvironmentSyncIn,
		MethodEnvironmentSyncOut,
		MethodEnvironmentStartInteractiveSetup,
		MethodEnvironmentGetInteractiveSetup,
		MethodEnvironmentCaptureTemplate,
		MethodEnvironmentCancelInteractiveSetup,
		MethodEnvironmentDeleteTemplate,
		MethodLoginPtyOpen,
		MethodLoginPtyInput,
		MethodLoginPtyStop,
		MethodLoginPtyClose,
		MethodDuplexChannelOpen,
		MethodDuplexChannelWrite,
		MethodDuplexChannelStop,
		MethodDuplexChannelClose,
	}
}
