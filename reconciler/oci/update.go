package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/oracle/oci-go-sdk/v65/common"
)

// sendUpdate sends an UpdateBackendSet request as the SDK's client method
// does (with the client's retry policy, which is none), except that the
// backends go into the body by encodeBackends. The SDK's own encoder runs
// regular expressions over a debug line for every optional field of every
// backend, logging on or off (common.Debugf redacts before it checks the
// level): about 100 ms of CPU per write of 5,000 backends, most of the
// controller's work when a node joins a large cluster. request is the
// typed request with an empty backend list; the rest of its body (the
// settings carried from the read), its path and headers are the SDK's. It
// returns the write's work request (opc-work-request-id), its error
// classified.
func sendUpdate(ctx context.Context, client *common.BaseClient, service, path string, request common.OCIRequest, backends any) (string, error) {
	sdkCtx, cs := call(ctx)
	req, err := request.HTTPRequest(http.MethodPut, path, nil, nil)
	if err == nil {
		err = setBackends(&req, backends)
	}
	var resp *http.Response
	if err == nil {
		resp, err = client.CallWithServiceAndOperationName(sdkCtx, &req, service, "UpdateBackendSet")
		defer common.CloseBodyIfValid(resp)
	}
	if err := classify("UpdateBackendSet", err, cs); err != nil {
		return "", err
	}
	return resp.Header.Get("opc-work-request-id"), nil
}

// setBackends replaces the "backends" of req's JSON body.
func setBackends(req *http.Request, backends any) error {
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("update body: %w", err)
	}
	if body["backends"], err = encodeBackends(backends); err != nil {
		return err
	}
	// Written out member by member: json.Marshal would check and compact
	// every RawMessage again, the backends too.
	raw = make([]byte, 0, len(raw)+len(body["backends"]))
	raw = append(raw, '{')
	for i, name := range slices.Sorted(maps.Keys(body)) {
		if i > 0 {
			raw = append(raw, ',')
		}
		key, _ := json.Marshal(name)
		raw = append(append(append(raw, key...), ':'), body[name]...)
	}
	raw = append(raw, '}')
	req.ContentLength = int64(len(raw))
	req.Header.Set("Content-Length", strconv.Itoa(len(raw)))
	req.Body = io.NopCloser(bytes.NewReader(raw))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	return nil
}

// encodeBackends encodes a slice of the SDK's backend details as the SDK
// would: its fields by their json names, a nil one left out where it is
// tagged mandatory:"false", null where it is mandatory. Those types contain
// only pointers to strings, numbers and booleans; any other field is an
// error, not a guess.
func encodeBackends(backends any) (json.RawMessage, error) {
	v := reflect.ValueOf(backends)
	if v.Kind() != reflect.Slice || v.Type().Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("update body: backends of type %s", v.Type())
	}
	fields, err := fieldsOf(v.Type().Elem())
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, v.Len()*128)
	out = append(out, '[')
	for i := range v.Len() {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '{')
		first := true
		for _, f := range fields {
			p := v.Index(i).Field(f.index)
			if p.IsNil() && !f.mandatory {
				continue
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			out = append(out, f.key...)
			if out, err = appendScalar(out, p); err != nil {
				return nil, err
			}
		}
		out = append(out, '}')
	}
	return append(out, ']'), nil
}

func appendScalar(out []byte, p reflect.Value) ([]byte, error) {
	if p.IsNil() {
		return append(out, "null"...), nil
	}
	switch e := p.Elem(); e.Kind() {
	case reflect.Bool:
		return strconv.AppendBool(out, e.Bool()), nil
	case reflect.Int, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(out, e.Int(), 10), nil
	default: // a string: encoding/json escapes it as the SDK's encoder does
		s, err := json.Marshal(e.Interface())
		return append(out, s...), err
	}
}

type sdkField struct {
	index     int
	key       []byte // "name":
	mandatory bool
}

var sdkFields sync.Map // reflect.Type -> []sdkField

func fieldsOf(t reflect.Type) ([]sdkField, error) {
	if cached, ok := sdkFields.Load(t); ok {
		return cached.([]sdkField), nil
	}
	var fields []sdkField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("json")
		if !ok || !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Type.Kind() != reflect.Pointer {
			return nil, fmt.Errorf("update body: %s.%s is not a pointer", t, sf.Name)
		}
		switch sf.Type.Elem().Kind() {
		case reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.String:
		default:
			return nil, fmt.Errorf("update body: %s.%s is of type %s", t, sf.Name, sf.Type)
		}
		key, _ := json.Marshal(name)
		fields = append(fields, sdkField{index: i, key: append(key, ':'), mandatory: sf.Tag.Get("mandatory") == "true"})
	}
	sdkFields.Store(t, fields)
	return fields, nil
}
