package promote

import (
	"context"
	"fmt"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/promoter"
)

// The optional parts of the store Run uses beyond Recorder; a
// *promoter.Store has them all. A store without one skips that step.

// releaseReader reads the trusted previous release a promotion re-derives
// the committed manifest from.
type releaseReader interface {
	ReleaseManifest(ctx context.Context, envTag string, version int64) ([]byte, error)
}

// workflowViewStager stages the compiled Workflow views before the release
// is recorded.
type workflowViewStager interface {
	StageWorkflowViews(ctx context.Context, manifest []byte, views []promoter.WorkflowView) error
}

var (
	_ releaseReader      = (*promoter.Store)(nil)
	_ workflowViewStager = (*promoter.Store)(nil)
)

// previousFrom returns the compiler's lookup of recorded releases in store.
// A store that cannot read releases verifies nothing beyond release 1.
func previousFrom(store Recorder) compiler.PreviousRelease {
	r, ok := store.(releaseReader)
	if !ok {
		return nil
	}
	return r.ReleaseManifest
}

// stageWorkflowViews stages the compiled views of the release whose
// archive is archive when the store records Workflow views.
func stageWorkflowViews(ctx context.Context, rec Recorder, archive []byte, views []promoter.WorkflowView) error {
	st, ok := rec.(workflowViewStager)
	if !ok {
		return nil
	}
	return st.StageWorkflowViews(ctx, archive, views)
}

// invalid builds a promoter.ErrInvalid naming the field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), promoter.ErrInvalid)
}
