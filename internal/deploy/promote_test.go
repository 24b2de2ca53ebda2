package deploy

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestKubernetesPromoteKeepsTheCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, parentModel())
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go c.control(ctx)
		k := c.deployer(t, candidate("vllm:v2"), Options{})
		if err := k.Deploy(context.Background()); err != nil {
			t.Fatalf("Deploy: %v", err)
		}
		gen := c.get(gvkModel, "serving", "glm").GetGeneration()
		if err := Promote(context.Background(), k, "recipe-1/20260101T000000Z"); err != nil {
			t.Fatalf("Promote: %v", err)
		}
		md := c.get(gvkModel, "serving", "glm")
		if got := md.GetLabels()[PromotedLabel]; got != "recipe-1-20260101T000000Z" {
			t.Errorf("ModelDeployment label %s=%q, want the run id", PromotedLabel, got)
		}
		if img, _, _ := unstructured.NestedString(md.Object, "spec", "image"); img != "vllm:v2" {
			t.Errorf("image after Promote = %q, want the candidate's vllm:v2", img)
		}
		// Only the label changed: no new generation, so no new rollout.
		if md.GetGeneration() != gen {
			t.Errorf("generation %d after Promote, was %d: the label started a rollout", md.GetGeneration(), gen)
		}
		if md.GetLabels()["owner"] != "platform" {
			t.Errorf("labels %v: Promote dropped a label it does not own", md.GetLabels())
		}
		if cm := c.get(gvkCM, "serving", "glm-flags"); cm == nil || cm.GetLabels()[PromotedLabel] == "" {
			t.Errorf("the candidate's ConfigMap is gone or unlabelled after Promote: %v", cm)
		}
		// Rollback now has nothing to do: the candidate stays.
		before := c.countCalls("")
		if err := k.Rollback(context.Background()); err != nil || c.countCalls("") != before {
			t.Errorf("Rollback after Promote: err %v, %d API calls", err, c.countCalls("")-before)
		}
		if img, _, _ := unstructured.NestedString(c.get(gvkModel, "serving", "glm").Object, "spec", "image"); img != "vllm:v2" {
			t.Errorf("image after the no-op rollback = %q, want vllm:v2", img)
		}

		// The next candidate is deployed over the promoted one: the label
		// goes with the fields headroom applied; its rollback puts the
		// promoted recipe back, label and all.
		k2 := c.deployer(t, candidate("vllm:v3"), Options{})
		if err := k2.Deploy(context.Background()); err != nil {
			t.Fatalf("second Deploy: %v", err)
		}
		if got, ok := c.get(gvkModel, "serving", "glm").GetLabels()[PromotedLabel]; ok {
			t.Errorf("the next candidate still carries %s=%s", PromotedLabel, got)
		}
		if err := k2.Rollback(context.Background()); err != nil {
			t.Fatalf("second Rollback: %v", err)
		}
		md = c.get(gvkModel, "serving", "glm")
		if img, _, _ := unstructured.NestedString(md.Object, "spec", "image"); img != "vllm:v2" || md.GetLabels()[PromotedLabel] != "recipe-1-20260101T000000Z" {
			t.Errorf("after rolling the next candidate back: image %q labels %v, want the promoted vllm:v2 and its label", img, md.GetLabels())
		}
	})
}

func TestKubernetesPromoteFailureStillRollsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, parentModel())
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go c.control(ctx)
		k := c.deployer(t, candidate("vllm:v2"), Options{})
		if err := k.Promote(context.Background(), "r"); err == nil || !strings.Contains(err.Error(), "deploy first") {
			t.Errorf("Promote before Deploy: %v", err)
		}
		if err := k.Deploy(context.Background()); err != nil {
			t.Fatalf("Deploy: %v", err)
		}
		c.mu.Lock()
		c.fail["patch modeldeployments"] = errors.New("admission webhook denied the request")
		c.mu.Unlock()
		err := k.Promote(context.Background(), "recipe-1/20260101T000000Z")
		if err == nil || !strings.Contains(err.Error(), "admission webhook denied") || !strings.Contains(err.Error(), "ModelDeployment serving/glm") {
			t.Fatalf("Promote with a failing apply: %v", err)
		}
		c.mu.Lock()
		c.fail = map[string]error{}
		c.mu.Unlock()
		// The snapshot was kept: the previous recipe goes back whole,
		// without the half-applied label.
		if err := k.Rollback(context.Background()); err != nil {
			t.Fatalf("Rollback after a failed Promote: %v", err)
		}
		checkRestored(t, c)
		if l := c.get(gvkModel, "serving", "glm").GetLabels(); !reflect.DeepEqual(l, map[string]string{"owner": "platform"}) {
			t.Errorf("labels after rollback %v, want the parent's", l)
		}
	})
}

func TestPromoteNeedsAPromoter(t *testing.T) {
	for _, d := range []Deployer{&None{}, &Command{}} {
		if err := Promote(context.Background(), d, "r"); err == nil || !strings.Contains(err.Error(), "kubernetes") {
			t.Errorf("Promote on %T: %v, want an error naming the kubernetes deployer", d, err)
		}
	}
}

func TestLabelValue(t *testing.T) {
	cases := []struct{ in, want string }{
		// A run directory's recipe and time.
		{"recipe-1/20260101T000000Z", "recipe-1-20260101T000000Z"},
		// A path with a leading folder and a second run in the same second.
		{"runs/recipe-1/20260101T000000Z-2", "runs-recipe-1-20260101T000000Z-2"},
		// Odd characters and ends.
		{"_my recipe@v2/", "my-recipe-v2"},
		// Too long: the end (the time) is kept, 63 characters at most.
		{strings.Repeat("a", 70) + "/20260101T000000Z", strings.Repeat("a", 46) + "-20260101T000000Z"},
	}
	for _, c := range cases {
		got := LabelValue(c.in)
		if got != c.want || len(got) > 63 {
			t.Errorf("LabelValue(%q) = %q (%d), want %q", c.in, got, len(got), c.want)
		}
	}
}
