package config

import (
	"strings"
	"testing"
)

// A .nan or .inf in a run file, and a file that is not text, name the
// field or the line (they said "json: unsupported value: NaN", "invalid
// leading UTF-8 octet" and "control characters are not allowed").
func TestDecodeErrorsNameTheFieldOrLine(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"nan", "bar:\n  ttft_p90_s: .nan\n", []string{"run.yaml:2:15", "bar.ttft_p90_s", ".nan is not a number"}},
		{"inf in a list", "sweep:\n  ladder: [2, -.Inf]\n", []string{"run.yaml:2:15", "sweep.ladder[1]", "-.Inf is not a number"}},
		{"not UTF-8", "bar:\n  ttft_p90_s: 3\n  \xff\xfe\n", []string{"run.yaml:3:3", "byte 0xff is not UTF-8 text"}},
		{"binary", "\x1f\x8b\x08\x00\x00\x00", []string{"run.yaml:1:1", "control character 0x1f"}},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.text), "run.yaml")
		if err == nil {
			t.Errorf("%s: parsed without error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
	}
	// a string that reads ".nan" in quotes is a string, not a number
	if _, err := Parse([]byte("recipe:\n  name: \".nan\"\n"), "run.yaml"); err != nil && strings.Contains(err.Error(), "not a number") {
		t.Errorf("a quoted .nan read as a number: %v", err)
	}
}

// A run file whose endpoint URL carries a password and is refused names
// the field, never the password.
func TestURLProblemsHideTheUserInfo(t *testing.T) {
	for _, ep := range []string{"ftp://user:s3cretpw@127.0.0.1:1", "http://user:s3cretpw@127.0.0.1:notaport"} {
		_, err := Parse([]byte("recipe:\n  endpoint: "+ep+"\n"), "run.yaml")
		if err == nil || strings.Contains(err.Error(), "s3cretpw") || !strings.Contains(err.Error(), "recipe.endpoint") {
			t.Errorf("endpoint %s: error %v; want recipe.endpoint named, the password not", ep, err)
		}
	}
}
