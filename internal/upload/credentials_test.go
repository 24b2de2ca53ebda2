package upload

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// isolateAWS empties every variable aws-sdk-go-v2's default chain reads,
// points the shared files at paths that do not exist and turns EC2's
// metadata service off, so a test sees only what it sets: never the host's
// keys or profiles, and never the real STS or IMDS.
func isolateAWS(t *testing.T) {
	t.Helper()
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN",
		"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
		"AWS_CA_BUNDLE", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_STS_REGIONAL_ENDPOINTS",
	} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "no-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// tempCreds is a temporary key pair with its session token, as STS, a
// container's credentials endpoint or EC2's metadata service hands out.
type tempCreds struct{ ak, sk, token string }

// expect makes the stand-in S3 take only requests signed with c.
func (f *fakeS3) expect(c tempCreds) {
	f.accessKey, f.secretKey, f.sessionToken = c.ak, c.sk, c.token
}

// fakeSTS is a loopback STS that answers AssumeRoleWithWebIdentity (the
// query API's form POST, answered in XML as AWS documents it) for one role
// and one web identity token, with creds.
type fakeSTS struct {
	roleARN, token string
	creds          tempCreds

	mu    sync.Mutex
	calls []url.Values
}

func (f *fakeSTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		stsError(w, http.StatusBadRequest, "MalformedInput", err.Error())
		return
	}
	f.mu.Lock()
	f.calls = append(f.calls, r.PostForm)
	f.mu.Unlock()
	form := r.PostForm
	switch {
	case r.Method != http.MethodPost || form.Get("Action") != "AssumeRoleWithWebIdentity" || form.Get("Version") != "2011-06-15":
		stsError(w, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("%s Action=%s Version=%s", r.Method, form.Get("Action"), form.Get("Version")))
	case form.Get("RoleArn") != f.roleARN:
		stsError(w, http.StatusForbidden, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity on "+form.Get("RoleArn"))
	case form.Get("WebIdentityToken") != f.token:
		stsError(w, http.StatusBadRequest, "InvalidIdentityToken", "the token is not the one issued")
	case form.Get("RoleSessionName") == "":
		stsError(w, http.StatusBadRequest, "ValidationError", "RoleSessionName is empty")
	default:
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:bench:headroom</SubjectFromWebIdentityToken>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/headroom-upload/%s</Arn>
      <AssumedRoleId>AROAHEADROOMTEST:%s</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId>
      <SecretAccessKey>%s</SecretAccessKey>
      <SessionToken>%s</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
    <Audience>sts.amazonaws.com</Audience>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>
`, form.Get("RoleSessionName"), form.Get("RoleSessionName"), f.creds.ak, f.creds.sk, f.creds.token, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}
}

func stsError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>0</RequestId></ErrorResponse>`, code, msg)
}

func (f *fakeSTS) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// webIdentity starts a loopback STS over TLS and sets the variables EKS's
// IRSA sets in a pod (a projected token file and the role), with the STS
// endpoint pointed at the stand-in and its certificate in $AWS_CA_BUNDLE.
func webIdentity(t *testing.T, creds tempCreds) *fakeSTS {
	t.Helper()
	sts := &fakeSTS{roleARN: "arn:aws:iam::123456789012:role/headroom-upload", token: "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.c2ln", creds: creds}
	srv := httptest.NewTLSServer(sts)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := errors.Join(os.WriteFile(tokenFile, []byte(sts.token), 0o600), os.WriteFile(caFile, ca, 0o600)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tokenFile)
	t.Setenv("AWS_ROLE_ARN", sts.roleARN)
	t.Setenv("AWS_ENDPOINT_URL_STS", srv.URL)
	t.Setenv("AWS_CA_BUNDLE", caFile)
	return sts
}

// TestUploadWebIdentity: with no key pair, only IRSA's variables, the
// upload takes temporary credentials from STS (one AssumeRoleWithWebIdentity
// for the whole run directory, over TLS to a server $AWS_CA_BUNDLE trusts)
// and signs every PUT with them, session token included. A role STS refuses
// sends nothing to the bucket.
func TestUploadWebIdentity(t *testing.T) {
	isolateAWS(t)
	creds := tempCreds{"ASIAHEADROOMWEBID", "temporary/secret+from+sts", "IQoJb3JpZ2luX2VjEHMaCXVzLWVhc3QtMSJGMEQCIF-web-identity"}
	sts := webIdentity(t, creds)
	f, srv := newFakeS3(t)
	f.expect(creds)
	dir := runDir(t, t.TempDir(), "recipe-0-vllm", "20261129T093000Z")
	s := S3{Endpoint: srv.URL, Bucket: "bench", Prefix: "headroom", Region: f.region}
	res, err := s.Upload(context.Background(), dir, RunName(dir), os.Getenv, srv.Client())
	if err != nil {
		t.Fatalf("upload: %v (stand-in refused: %v)", err, f.refused)
	}
	if res.Files != 6 || len(f.order) != 6 || len(f.refused) != 0 {
		t.Errorf("result %+v, stored %v, refused %v: want all 6 files signed with STS's credentials", res, f.order, f.refused)
	}
	if n := sts.callCount(); n != 1 {
		t.Errorf("%d AssumeRoleWithWebIdentity calls for one upload, want 1 (the credentials are cached)", n)
	}
	if res.Credentials != "WebIdentityCredentials" {
		t.Errorf("result says the credentials came from %q, want WebIdentityCredentials", res.Credentials)
	}

	// STS refuses the role: the error says so, and no PUT is sent.
	sts.roleARN = "arn:aws:iam::123456789012:role/another"
	f2, srv2 := newFakeS3(t)
	f2.expect(creds)
	s.Endpoint = srv2.URL
	_, err = s.Upload(context.Background(), dir, RunName(dir), os.Getenv, srv2.Client())
	if err == nil || !strings.Contains(err.Error(), "AccessDenied") || !strings.Contains(err.Error(), "credential chain") {
		t.Errorf("a role STS refuses: %v", err)
	}
	if len(f2.order)+len(f2.refused) != 0 {
		t.Errorf("requests reached the bucket without credentials: %v %v", f2.order, f2.refused)
	}
}

// credsServer serves one handler on loopback and returns its URL.
func credsServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestUploadCredentialChain: each other link of the SDK's default chain
// gives the credentials the upload signs with: the environment's key pair
// with its session token, a profile in a shared credentials file, a
// container's credentials endpoint (ECS, EKS Pod Identity) and EC2's
// instance role, the last two as loopback stand-ins.
func TestUploadCredentialChain(t *testing.T) {
	creds := tempCreds{"ASIAHEADROOMCHAIN", "chain/secret+key", "session-token-from-the-chain"}
	expiry := func() string { return time.Now().Add(time.Hour).UTC().Format(time.RFC3339) }
	cases := []struct {
		name   string
		setup  func(t *testing.T) tempCreds
		source string // in Result.Credentials
	}{
		{"environment", func(t *testing.T) tempCreds {
			t.Setenv("AWS_ACCESS_KEY_ID", creds.ak)
			t.Setenv("AWS_SECRET_ACCESS_KEY", creds.sk)
			t.Setenv("AWS_SESSION_TOKEN", creds.token)
			return creds
		}, "$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY"},
		{"shared credentials file", func(t *testing.T) tempCreds {
			file := filepath.Join(t.TempDir(), "credentials")
			body := "[default]\naws_access_key_id = AKIDNOTTHISONE\naws_secret_access_key = not-this-one\n\n[bench]\naws_access_key_id = AKIDHEADROOMPROFILE\naws_secret_access_key = profile/secret\n"
			if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", file)
			t.Setenv("AWS_PROFILE", "bench")
			return tempCreds{"AKIDHEADROOMPROFILE", "profile/secret", ""}
		}, "SharedConfigCredentials"},
		{"container role", func(t *testing.T) tempCreds {
			u := credsServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "pod-identity-token" || r.URL.Path != "/v1/credentials" {
					http.Error(w, `{"code":"AccessDenied","message":"no"}`, http.StatusForbidden)
					return
				}
				json.NewEncoder(w).Encode(map[string]string{"AccessKeyId": creds.ak, "SecretAccessKey": creds.sk, "Token": creds.token, "Expiration": expiry()})
			})
			// as EKS Pod Identity sets them: the token in a file
			file := filepath.Join(t.TempDir(), "eks-pod-identity-token")
			if err := os.WriteFile(file, []byte("pod-identity-token"), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", u+"/v1/credentials")
			t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", file)
			return creds
		}, "CredentialsEndpointProvider"},
		{"instance role", func(t *testing.T) tempCreds {
			u := credsServer(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
					w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
					fmt.Fprint(w, "imdsv2-session")
				case r.Header.Get("X-Aws-Ec2-Metadata-Token") != "imdsv2-session":
					http.Error(w, "", http.StatusUnauthorized)
				case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
					fmt.Fprint(w, "headroom-node\n")
				case r.URL.Path == "/latest/meta-data/iam/security-credentials/headroom-node":
					json.NewEncoder(w).Encode(map[string]string{"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": creds.ak, "SecretAccessKey": creds.sk, "Token": creds.token, "Expiration": expiry(), "LastUpdated": time.Now().UTC().Format(time.RFC3339)})
				default:
					http.NotFound(w, r)
				}
			})
			t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
			t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", u)
			return creds
		}, "EC2RoleProvider"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolateAWS(t)
			want := c.setup(t)
			f, srv := newFakeS3(t)
			f.expect(want)
			dir := runDir(t, t.TempDir(), "r", "20260101T000000Z")
			s := S3{Endpoint: srv.URL, Bucket: "bench", Region: f.region}
			res, err := s.Upload(context.Background(), dir, RunName(dir), os.Getenv, srv.Client())
			if err != nil {
				t.Fatalf("upload: %v (stand-in refused: %v)", err, f.refused)
			}
			if len(f.order) != 6 || len(f.refused) != 0 {
				t.Errorf("stored %v, refused %v", f.order, f.refused)
			}
			if !strings.Contains(res.Credentials, c.source) {
				t.Errorf("result says the credentials came from %q, want %q", res.Credentials, c.source)
			}
		})
	}
}

// TestUploadKeyPairErrors: key pairs that cannot be right are refused
// before anything is sent, each error naming what to set; variables the
// run file names are the only place looked at; and with nothing anywhere,
// the chain's own error comes back.
func TestUploadKeyPairErrors(t *testing.T) {
	isolateAWS(t)
	sts := webIdentity(t, tempCreds{"ASIANOTUSED", "not-used", "not-used"})
	f, srv := newFakeS3(t)
	dir := runDir(t, t.TempDir(), "r", "20260101T000000Z")
	cases := []struct {
		name string
		s    S3
		env  map[string]string
		err  string
	}{
		{"half a pair", S3{}, map[string]string{"AWS_ACCESS_KEY_ID": "AKIDHALF"}, "$AWS_SECRET_ACCESS_KEY is empty but $AWS_ACCESS_KEY_ID is set"},
		{"the other half", S3{}, map[string]string{"AWS_SECRET_ACCESS_KEY": "half"}, "$AWS_ACCESS_KEY_ID is empty but $AWS_SECRET_ACCESS_KEY is set"},
		{"named variables empty", S3{AccessKeyEnv: "HR_AK", SecretKeyEnv: "HR_SK"}, nil, "$HR_AK and $HR_SK empty"},
		{"named session token empty", S3{SessionTokenEnv: "HR_TOKEN"}, map[string]string{"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "sk"}, "$HR_TOKEN (session_token_env) is empty"},
		{"session token without keys", S3{SessionTokenEnv: "HR_TOKEN"}, map[string]string{"HR_TOKEN": "tok"}, "$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.s.Endpoint, c.s.Bucket, c.s.Region = srv.URL, "bench", f.region
			_, err := c.s.Upload(context.Background(), dir, RunName(dir), func(k string) string { return c.env[k] }, srv.Client())
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %v, want %q", err, c.err)
			}
		})
	}
	if len(f.order)+len(f.refused) != 0 {
		t.Errorf("requests were sent: %v %v", f.order, f.refused)
	}
	if n := sts.callCount(); n != 0 {
		t.Errorf("the chain was asked (%d STS calls) though the key pair settled where the keys come from", n)
	}

	// Nothing anywhere (no keys, no profile, no web identity, no container
	// endpoint, IMDS off): the chain's error, and nothing sent.
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	t.Setenv("AWS_ROLE_ARN", "")
	s := S3{Endpoint: srv.URL, Bucket: "bench", Region: f.region}
	_, err := s.Upload(context.Background(), dir, RunName(dir), os.Getenv, srv.Client())
	if err == nil || !strings.Contains(err.Error(), "credential chain") || !strings.Contains(err.Error(), "$AWS_ACCESS_KEY_ID") {
		t.Errorf("no credentials anywhere: %v", err)
	}
	if len(f.order)+len(f.refused) != 0 {
		t.Errorf("requests were sent without credentials: %v %v", f.order, f.refused)
	}
}

// TestSecretEnvs: the variables a caller keeps out of what it writes are
// the pair's and the session token's, whichever names the run file gives.
func TestSecretEnvs(t *testing.T) {
	cases := []struct {
		s    S3
		want string
	}{
		{S3{}, "AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN"},
		{S3{AccessKeyEnv: "HR_AK", SecretKeyEnv: "HR_SK"}, "HR_AK HR_SK"},
		{S3{SessionTokenEnv: "HR_TOKEN"}, "AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY HR_TOKEN"},
	}
	for _, c := range cases {
		if got := strings.Join(c.s.SecretEnvs(), " "); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
}
