package deploy

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PromotedLabel marks the objects of a candidate that was kept instead of
// rolled back; its value is the run that earned it.
const PromotedLabel = "headroom.dev/promoted"

// Promoter is a deployer that can keep what it deployed: after Promote,
// Rollback has nothing to undo.
type Promoter interface {
	Promote(ctx context.Context, runID string) error
}

// Promote keeps what d deployed, marked with runID, instead of rolling it
// back; a deployer that cannot (none, command) is an error, and the caller
// rolls back as usual.
func Promote(ctx context.Context, d Deployer, runID string) error {
	p, ok := d.(Promoter)
	if !ok {
		return errors.New("this deployer cannot keep a candidate: only deploy.type kubernetes can promote")
	}
	return p.Promote(ctx, runID)
}

var (
	labelBad   = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
	labelTrims = "._-"
)

// LabelValue turns a run id into a valid label value: letters, digits,
// '.', '_' and '-', at most 63 characters, beginning and ending with a
// letter or digit. A run directory's runs/<recipe>/<time> reads
// <recipe>-<time>.
func LabelValue(runID string) string {
	v := labelBad.ReplaceAllString(runID, "-")
	v = strings.Trim(v, labelTrims)
	if len(v) > 63 {
		v = strings.TrimRight(v[len(v)-63:], labelTrims) // the time is the end: keep it
		v = strings.TrimLeft(v, labelTrims)
	}
	return v
}

// Promote keeps the deployed candidate: it applies every object again as
// deployed, with PromotedLabel set to the run id (the same server-side
// apply, so nothing but the label changes and no rollout starts), and
// drops the snapshot, so a later Rollback does nothing. Deploying the next
// candidate over it removes the label (headroom owns it, and that
// candidate's manifests do not set it); rolling that one back restores it.
// On an error the snapshot is kept and Rollback still puts the previous
// recipe back.
func (k *Kubernetes) Promote(ctx context.Context, runID string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.snapped {
		return errors.New("nothing deployed to promote: deploy first")
	}
	value := LabelValue(runID)
	if value == "" {
		return fmt.Errorf("run id %q makes no label value", runID)
	}
	for _, ob := range k.objs {
		if !ob.touched {
			return fmt.Errorf("%s was never applied: the deploy did not finish, so there is nothing whole to keep", ob.desc)
		}
	}
	for _, ob := range k.objs {
		want := ob.want.DeepCopy()
		labels := want.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[PromotedLabel] = value
		want.SetLabels(labels)
		if _, err := ob.res.Apply(ctx, want.GetName(), want, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("label %s %s=%s: %w (the candidate is still up; roll back or promote again)", ob.desc, PromotedLabel, value, err)
		}
		k.opts.logf("promoted %s (%s=%s)", ob.desc, PromotedLabel, value)
	}
	k.snapped = false
	for _, ob := range k.objs {
		ob.prior, ob.touched = nil, false
	}
	return nil
}
