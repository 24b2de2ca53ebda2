package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionFromBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		set  string
		info *debug.BuildInfo
		want string
	}{
		{"dev", info, "v0.3.0 (commit 0123456789ab+dirty, go1.26.8)"},            // module version and commit from the build info
		{"v1.2.3", info, "v1.2.3 (commit 0123456789ab+dirty, go1.26.8)"},         // -ldflags wins
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"}, // a go run build knows nothing more
		{"dev", nil, "dev"},
	} {
		if got := versionString(tc.set, tc.info, tc.info != nil); got != tc.want {
			t.Errorf("versionString(%q) = %q, want %q", tc.set, got, tc.want)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "headroom version ") || !strings.Contains(out.String(), fullVersion()) {
		t.Errorf("--version printed %q, want %q", out.String(), fullVersion())
	}
}
