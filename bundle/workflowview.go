package bundle

// States of a recorded Workflow view, as the promoter's status and the
// operator console report them.
const (
	// WorkflowViewPinnable: the view is recorded and its publication is not
	// revoked; the Workflow service may admit work against it.
	WorkflowViewPinnable = "PINNABLE"
	// WorkflowViewRevoked: the view's publication is revoked; no new work
	// may be admitted against it.
	WorkflowViewRevoked = "REVOKED"
)
