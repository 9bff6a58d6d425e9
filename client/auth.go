package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Auth adds credentials to each attempt of a request. body is the
// request's payload (nil for none), for signers that hash it.
type Auth interface {
	Authorize(ctx context.Context, req *http.Request, body []byte) error
}

// Bearer sends "Authorization: Bearer <token>": a Cognito ID token, or
// whatever a Lambda authorizer accepts.
type Bearer string

// Authorize implements Auth.
func (b Bearer) Authorize(ctx context.Context, req *http.Request, body []byte) error {
	return Token{Value: string(b)}.Authorize(ctx, req, body)
}

// Token sends "Bearer <Value>" in the header Header, Authorization when
// empty: the header the stack's authorizer reads (its AuthHeader
// parameter), which need not be Authorization.
type Token struct {
	Header, Value string
}

// Authorize implements Auth.
func (t Token) Authorize(_ context.Context, req *http.Request, _ []byte) error {
	if t.Value == "" {
		return errors.New("empty bearer token")
	}
	header := t.Header
	if header == "" {
		header = "Authorization"
	}
	req.Header.Set(header, "Bearer "+t.Value)
	return nil
}

// SigV4Service is the service name API Gateway's IAM authorization checks
// signatures for.
const SigV4Service = "execute-api"

// SigV4 signs every attempt with AWS Signature Version 4 for execute-api,
// as API Gateway's AWS_IAM authorization wants; each attempt is signed
// anew, so a retry never carries a stale signature.
type SigV4 struct {
	Credentials aws.CredentialsProvider
	Region      string
	// Now is the signing clock; nil means time.Now.
	Now func() time.Time
}

// LoadSigV4 returns a SigV4 over the standard AWS credential chain
// (environment, shared config and credentials files, SSO, web identity,
// container and instance roles), of the named profile when profile is not
// empty. region empty means the chain's region (AWS_REGION, the profile's).
func LoadSigV4(ctx context.Context, profile, region string) (*SigV4, error) {
	var opts []func(*config.LoadOptions) error
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		return nil, errors.New("sigv4: no region: set one in the profile, AWS_REGION or --region")
	}
	return &SigV4{Credentials: cfg.Credentials, Region: cfg.Region}, nil
}

// Authorize implements Auth.
func (s *SigV4) Authorize(ctx context.Context, req *http.Request, body []byte) error {
	if s.Credentials == nil {
		return errors.New("sigv4: no credentials")
	}
	creds, err := s.Credentials.Retrieve(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), SigV4Service, s.Region, now())
}
