package upload

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// DefaultSessionTokenEnv holds the session token that goes with a key pair
// in the default variables (temporary credentials); it may be empty.
const DefaultSessionTokenEnv = "AWS_SESSION_TOKEN"

// namedKeys says whether the run file names the variables the keys are in;
// then they come from there and nowhere else.
func (s S3) namedKeys() bool {
	return s.AccessKeyEnv != "" || s.SecretKeyEnv != "" || s.SessionTokenEnv != ""
}

// SecretEnvs names the variables whose values are secrets (the key pair and
// the session token), for a caller that keeps them out of what it writes.
func (s S3) SecretEnvs() []string {
	names := []string{orDefault(s.AccessKeyEnv, DefaultAccessKeyEnv), orDefault(s.SecretKeyEnv, DefaultSecretKeyEnv)}
	switch {
	case s.SessionTokenEnv != "":
		names = append(names, s.SessionTokenEnv)
	case !s.namedKeys():
		names = append(names, DefaultSessionTokenEnv)
	}
	return names
}

// credentials says where the upload's credentials come from. A key pair
// in the variables access_key_env and secret_key_env name (by default
// $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY, then with
// $AWS_SESSION_TOKEN when set) is used as it is. When the run file names
// none of those variables and the default ones hold no key pair, it is
// aws-sdk-go-v2's default credential chain: a profile in the shared files
// ($AWS_PROFILE, ~/.aws/credentials, ~/.aws/config), web identity
// ($AWS_ROLE_ARN and $AWS_WEB_IDENTITY_TOKEN_FILE, as EKS's IRSA sets them),
// a container's credentials endpoint (ECS, EKS Pod Identity), then the
// instance's role from EC2's metadata service.
func (s S3) credentials(ctx context.Context, env func(string) string) (aws.CredentialsProvider, error) {
	akName, skName := orDefault(s.AccessKeyEnv, DefaultAccessKeyEnv), orDefault(s.SecretKeyEnv, DefaultSecretKeyEnv)
	ak, sk := env(akName), env(skName)
	switch {
	case ak != "" && sk != "":
		var token string
		if s.SessionTokenEnv != "" {
			if token = env(s.SessionTokenEnv); token == "" {
				return nil, fmt.Errorf("$%s (session_token_env) is empty: set the session token there, or leave session_token_env out for keys that need none", s.SessionTokenEnv)
			}
		} else if !s.namedKeys() {
			token = env(DefaultSessionTokenEnv)
		}
		return credentials.StaticCredentialsProvider{Value: aws.Credentials{
			AccessKeyID: ak, SecretAccessKey: sk, SessionToken: token,
			Source: "$" + akName + " and $" + skName,
		}}, nil
	case ak != "" || sk != "":
		set, empty := akName, skName
		if ak == "" {
			set, empty = skName, akName
		}
		return nil, fmt.Errorf("$%s is empty but $%s is set: set both (the bucket's key pair), or neither for the SDK's default credential chain", empty, set)
	case s.namedKeys():
		return nil, fmt.Errorf("$%s and $%s empty: set the bucket's key pair there (in Kubernetes, from a Secret), or leave access_key_env, secret_key_env and session_token_env out of the run file for the SDK's default credential chain (a profile, web identity, a container's or the instance's role)", akName, skName)
	}
	// STS and the other links use the environment's region ($AWS_REGION,
	// as EKS sets it) or the profile's, else the bucket's; and the SDK's own
	// HTTP client, which takes $AWS_CA_BUNDLE (the bucket's client may not).
	cfg, err := config.LoadDefaultConfig(ctx, config.WithDefaultRegion(s.region()))
	if err != nil {
		return nil, fmt.Errorf("no credentials: no key pair in $%s and $%s, and the SDK's default credential chain could not be set up: %w", akName, skName, err)
	}
	return chainProvider{cfg.Credentials, akName, skName}, nil
}

// chainProvider is the SDK's default chain with an error that says what
// was looked at and what to set.
type chainProvider struct {
	aws.CredentialsProvider
	akName, skName string
}

func (c chainProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	creds, err := c.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return creds, fmt.Errorf("no credentials: no key pair in $%s and $%s, and the SDK's default credential chain (a profile in the shared files, web identity from $AWS_ROLE_ARN and $AWS_WEB_IDENTITY_TOKEN_FILE, a container's or the instance's role) failed: %w", c.akName, c.skName, err)
	}
	return creds, nil
}
