package canary

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// WeightTotal is what the two backendRefs' weights add up to: a share s is
// the weights (WeightTotal(1-s), WeightTotal s), rounded.
const WeightTotal = 1000

// Routes reads and writes a namespace's HTTPRoutes: the typed client's
// GatewayV1().HTTPRoutes(namespace) does.
type Routes interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*gwv1.HTTPRoute, error)
	Update(ctx context.Context, route *gwv1.HTTPRoute, opts metav1.UpdateOptions) (*gwv1.HTTPRoute, error)
}

// Weights are the two backendRefs' weights of the rule; nil is a weight
// left unset (the API reads it as 1).
type Weights struct {
	Baseline  *int32 `json:"baseline"`
	Candidate *int32 `json:"candidate"`
}

func (w Weights) String() string {
	f := func(p *int32) string {
		if p == nil {
			return "unset"
		}
		return fmt.Sprint(*p)
	}
	return f(w.Baseline) + "/" + f(w.Candidate)
}

func (w Weights) equal(o Weights) bool {
	eq := func(a, b *int32) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return *a == *b
	}
	return eq(w.Baseline, o.Baseline) && eq(w.Candidate, o.Candidate)
}

// share is the candidate's share the weights give (an unset weight
// reads 1).
func (w Weights) share() float64 {
	b, c := 1.0, 1.0
	if w.Baseline != nil {
		b = float64(*w.Baseline)
	}
	if w.Candidate != nil {
		c = float64(*w.Candidate)
	}
	if b+c == 0 {
		return 0
	}
	return c / (b + c)
}

func weightsOf(share float64) Weights {
	c := int32(math.Round(share * WeightTotal))
	b := int32(WeightTotal) - c
	return Weights{Baseline: &b, Candidate: &c}
}

// Write is one change the split made to the route's weights.
type Write struct {
	Why             string  `json:"why"` // begin, raise, rollback, restore
	Share           float64 `json:"share"`
	Weights         Weights `json:"weights"`
	ResourceVersion string  `json:"resource_version"` // the route's, after the write
}

// HTTPRouteSplit gives the candidate its share through a Gateway API
// HTTPRoute: the weights of two backendRefs of one rule, set on the API
// server with optimistic concurrency (the route's resourceVersion; a
// conflict is read again and retried). It never fights another writer:
// before each change it checks that the weights are still those it found
// or last set, and refuses, saying so, when they are not. A rule without
// session persistence is refused too: a gateway then routes each request
// by weight on its own, and a conversation would move between the copies
// and lose its cache.
//
// Begin (the first SetShare) records the weights it finds; Rollback sets
// the candidate's weight to 0 at once; Finish restores the weights found
// (failed, undecided, stopped) or leaves the last share's (ready).
type HTTPRouteSplit struct {
	Routes          Routes
	Namespace, Name string
	Rule            int
	// Baseline and Candidate are the backendRefs' names.
	Baseline, Candidate string
	// SessionHeader, when set, is the header that names an agent's
	// session (canary.session_header): a rule whose persistence is by
	// header must use that header.
	SessionHeader string

	mu     sync.Mutex
	begun  bool
	found  Weights
	last   Weights
	writes []Write
}

func (s *HTTPRouteSplit) String() string {
	return fmt.Sprintf("HTTPRoute %s/%s rule %d (baseline backendRef %s, candidate %s)", s.Namespace, s.Name, s.Rule, s.Baseline, s.Candidate)
}

// Writes are the changes made so far, in order.
func (s *HTTPRouteSplit) Writes() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write(nil), s.writes...)
}

// Found is the weights the split found when it began.
func (s *HTTPRouteSplit) Found() Weights {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.found
}

// refs finds the rule and its two backendRefs' indices, and checks that the
// rule can carry the split.
func (s *HTTPRouteSplit) refs(rt *gwv1.HTTPRoute) (rule *gwv1.HTTPRouteRule, base, cand int, err error) {
	where := fmt.Sprintf("HTTPRoute %s/%s", s.Namespace, s.Name)
	if s.Rule < 0 || s.Rule >= len(rt.Spec.Rules) {
		return nil, 0, 0, fmt.Errorf("%s has %d rules, so there is no rule %d: set canary.split.httproute.rule to the index of the rule that routes the agents' chat requests", where, len(rt.Spec.Rules), s.Rule)
	}
	rule = &rt.Spec.Rules[s.Rule]
	where = fmt.Sprintf("%s rule %d", where, s.Rule)
	base, cand = -1, -1
	var others []string
	for i, ref := range rule.BackendRefs {
		name := string(ref.Name)
		switch {
		case name == s.Baseline || name == s.Candidate:
			at := &base
			if name == s.Candidate {
				at = &cand
			}
			if *at >= 0 {
				return nil, 0, 0, fmt.Errorf("%s has two backendRefs named %s: the split would not know which to weigh; keep one", where, name)
			}
			*at = i
		case ref.Weight == nil || *ref.Weight > 0:
			others = append(others, name)
		}
	}
	var missing []string
	if base < 0 {
		missing = append(missing, "baseline "+s.Baseline)
	}
	if cand < 0 {
		missing = append(missing, "candidate "+s.Candidate)
	}
	if len(missing) > 0 {
		return nil, 0, 0, fmt.Errorf("%s has no backendRef for the %s: add it to the rule's backendRefs (the candidate's with weight 0), or fix canary.split.httproute's baseline and candidate", where, strings.Join(missing, " or the "))
	}
	if len(others) > 0 {
		return nil, 0, 0, fmt.Errorf("%s also sends traffic to %s: the candidate's weight would not be its share; set their weights to 0 or move them to a rule of their own", where, strings.Join(others, ", "))
	}
	return rule, base, cand, nil
}

// checkPersistence refuses a rule without session persistence, or with a
// header other than the agents' session header.
func (s *HTTPRouteSplit) checkPersistence(rule *gwv1.HTTPRouteRule) error {
	where := fmt.Sprintf("HTTPRoute %s/%s rule %d", s.Namespace, s.Name, s.Rule)
	sp := rule.SessionPersistence
	if sp == nil {
		hint := "type: Header with sessionName: the header your agents send their session in"
		if s.SessionHeader != "" {
			hint = fmt.Sprintf("type: Header, sessionName: %s", s.SessionHeader)
		}
		return fmt.Errorf("%s has no sessionPersistence: the gateway would split each request by weight on its own, so a conversation would move between the copies and lose its cache; set spec.rules[%d].sessionPersistence (%s; or type: Cookie for clients that keep cookies), which needs the experimental channel's HTTPRoute CRD and a gateway that supports it (docs/canary.md)",
			where, s.Rule, hint)
	}
	if sp.Type != nil && *sp.Type == gwv1.HeaderBasedSessionPersistence && s.SessionHeader != "" {
		if sp.SessionName == nil || !strings.EqualFold(*sp.SessionName, s.SessionHeader) {
			name := "unset"
			if sp.SessionName != nil {
				name = *sp.SessionName
			}
			return fmt.Errorf("%s keeps sessions by header %s, but canary.session_header is %s: the gateway would not keep the agents' sessions whole; make them the same", where, name, s.SessionHeader)
		}
	}
	return nil
}

func (s *HTTPRouteSplit) weights(rule *gwv1.HTTPRouteRule, base, cand int) Weights {
	cp := func(p *int32) *int32 {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	return Weights{Baseline: cp(rule.BackendRefs[base].Weight), Candidate: cp(rule.BackendRefs[cand].Weight)}
}

// update reads the route, lets change decide the new weights from the
// weights it finds, and writes them; a conflict (another write since the
// read) is read again and retried. change returns ok false to write
// nothing.
func (s *HTTPRouteSplit) update(ctx context.Context, why string, share float64, change func(rule *gwv1.HTTPRouteRule, now Weights) (Weights, bool, error)) error {
	where := fmt.Sprintf("HTTPRoute %s/%s", s.Namespace, s.Name)
	var wrote *Write
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wrote = nil
		rt, err := s.Routes.Get(ctx, s.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s not found (or the API server serves no HTTPRoutes: install the Gateway API CRDs): create it, or fix canary.split.httproute's namespace and name", where)
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", where, err)
		}
		rule, base, cand, err := s.refs(rt)
		if err != nil {
			return err
		}
		to, ok, err := change(rule, s.weights(rule, base, cand))
		if err != nil || !ok {
			return err
		}
		rule.BackendRefs[base].Weight, rule.BackendRefs[cand].Weight = to.Baseline, to.Candidate
		out, err := s.Routes.Update(ctx, rt, metav1.UpdateOptions{FieldManager: "headroom-canary"})
		if err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("setting %s's weights to %s: %w", where, to, err)
		}
		wrote = &Write{Why: why, Share: share, Weights: to, ResourceVersion: out.ResourceVersion}
		return nil
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%s kept changing under the split (%v): another writer is busy with it; stop it and run the canary again", where, err)
	}
	if wrote != nil {
		s.last = wrote.Weights
		s.writes = append(s.writes, *wrote)
	}
	return err
}

// changed is the refusal when the weights are not the split's own.
func (s *HTTPRouteSplit) changed(now Weights, what string) error {
	return fmt.Errorf("HTTPRoute %s/%s rule %d: the weights (baseline/candidate) are %s, but the canary had them at %s: someone else changed them, and the canary will not fight another controller, so it does not %s; find who changed them",
		s.Namespace, s.Name, s.Rule, now, s.last, what)
}

// SetShare sets the weights to (1-share, share) of WeightTotal. The first
// call begins the split: it checks the route, its rule, the two
// backendRefs and the rule's session persistence, and records the weights
// it finds; every later one refuses when the weights are not those the
// split last set.
func (s *HTTPRouteSplit) SetShare(ctx context.Context, share float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	why := "raise"
	if !s.begun {
		why = "begin"
	}
	to := weightsOf(share)
	var found Weights
	err := s.update(ctx, why, share, func(rule *gwv1.HTTPRouteRule, now Weights) (Weights, bool, error) {
		if !s.begun {
			if err := s.checkPersistence(rule); err != nil {
				return Weights{}, false, err
			}
			found = now
		} else if !now.equal(s.last) {
			return Weights{}, false, s.changed(now, fmt.Sprintf("raise the candidate's share to %g", share))
		}
		return to, true, nil
	})
	if err == nil && !s.begun {
		s.found, s.begun = found, true
	}
	return err
}

// Rollback sets the candidate's weight to 0 at once, keeping the
// baseline's (or giving it WeightTotal when it was 0). A clear miss is
// rolled back even when someone else changed the weights since the split
// last set them: the candidate's weight goes to 0 all the same, and the
// error says what was found.
func (s *HTTPRouteSplit) Rollback(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.begun {
		return nil
	}
	var theirs error
	err := s.update(ctx, "rollback", 0, func(_ *gwv1.HTTPRouteRule, now Weights) (Weights, bool, error) {
		theirs = nil
		if !now.equal(s.last) {
			theirs = fmt.Errorf("HTTPRoute %s/%s rule %d: the weights were %s, not the canary's %s: someone else changed them; the candidate's weight was set to 0 all the same (a clear miss)", s.Namespace, s.Name, s.Rule, now, s.last)
		}
		b := int32(1) // an unset weight reads 1
		if now.Baseline != nil {
			b = *now.Baseline
		}
		if b == 0 {
			b = WeightTotal
		}
		var zero int32
		return Weights{Baseline: &b, Candidate: &zero}, true, nil
	})
	return errors.Join(err, theirs)
}

// Finish leaves the route as the outcome wants: a ready candidate keeps
// the last share's weights (as the run file's last share says); any other
// outcome (failed, undecided, stopped) puts back the weights the split
// found, unless someone else changed them since the split last set them.
func (s *HTTPRouteSplit) Finish(ctx context.Context, outcome string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.begun || outcome == Ready {
		return nil
	}
	return s.update(ctx, "restore", s.found.share(), func(_ *gwv1.HTTPRouteRule, now Weights) (Weights, bool, error) {
		if !now.equal(s.last) {
			return Weights{}, false, s.changed(now, "put back the weights it found ("+s.found.String()+")")
		}
		return s.found, !now.equal(s.found), nil
	})
}
