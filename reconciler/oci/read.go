package oci

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/oracle/oci-go-sdk/v65/common"
)

// readOne sends a GET of path (below the client's base path, its parameters
// filled in as the SDK fills them: unescaped) as the SDK's generated client
// methods do, decodes the answer's body into out, and returns its ETag.
// Those methods build the request and read the answer by reflection, and
// format and redact a debug line for every field they touch, logging on or
// off (common.Debugln runs its regular expressions before it checks the
// level; addToPath compiles one for every path parameter): per read of a
// backend set of 148 backends, about as much CPU again as decoding it
// (BenchmarkRead). The request is otherwise the SDK's: its client's host,
// base path, user agent, signer, circuit breaker and HTTP client, with the
// SDK's headers and an opc-request-id made as the SDK makes one.
func readOne(ctx context.Context, client *common.BaseClient, service, operation, path string, out any) (etag string, err error) {
	req := common.MakeDefaultHTTPRequest(http.MethodGet, path)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("opc-request-id", requestID())
	req.Header.Set("opc-client-retries", "false") // the SDK's word for a client without its retries
	resp, err := client.CallWithServiceAndOperationName(ctx, &req, service, operation)
	defer common.CloseBodyIfValid(resp)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body) // bounded by the dispatcher
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return "", fmt.Errorf("%s answer: %w", operation, err)
	}
	return resp.Header.Get("etag"), nil
}

// requestID is a new opc-request-id: 16 random bytes in hex, as the SDK
// makes them.
func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
