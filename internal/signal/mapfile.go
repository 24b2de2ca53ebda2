package signal

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"sigs.k8s.io/yaml"
)

// LoadMapping reads a mapping file and lays it over base. The file is a YAML
// list of rules:
//
//   - common: ttft_seconds
//     metric: my_engine_ttft_milliseconds
//     kind: histogram
//     scale: 0.001
//   - common: http_5xx
//     metric: my_gateway_requests_total
//     match: {code: "5.."}
//     kind: counter
//
// The rules of the file for a common name replace every base rule for that
// name; common names the file does not mention keep the base's rules. Errors
// name the file, the rule's index (from 0) and the field.
func LoadMapping(path string, base Mapping) (Mapping, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading metric mapping file: %w", err)
	}
	var rules []Rule
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		return nil, fmt.Errorf("metric mapping file %s: %w (want a YAML list of rules with common, metric, kind and optional match, scale, field)", path, err)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("metric mapping file %s has no rules: list at least one, or leave the file out", path)
	}
	var errs []error
	replaced := map[string]bool{}
	for i, r := range rules {
		if err := r.Check(); err != nil {
			errs = append(errs, fmt.Errorf("metric mapping file %s: rule %d: %w", path, i, err))
		}
		replaced[r.Common] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(slices.Clone(base), func(r Rule) bool { return replaced[r.Common] })
	return append(out, rules...), nil
}
