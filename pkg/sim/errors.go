package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// Error types in response bodies, named as vLLM names them. Errors that
// vLLM's serving code reports (OpenAIServing.create_error_response) use
// these; request validation (FastAPI's RequestValidationError) and HTTP
// exceptions use the status's reason phrase instead ("Bad Request").
const (
	typeBadRequest  = "BadRequestError"
	typeNotFound    = "NotFoundError"
	typeInternal    = "InternalServerError"
	typeUnavailable = "ServiceUnavailableError"
)

// errorInfo and errorResponse are vLLM's error body (ErrorInfo and
// ErrorResponse in vllm/entrypoints/openai/engine/protocol.py), serialized
// as pydantic's model_dump does: {"error": {"message", "type", "param",
// "code"}}, with param always present (null unless the error names a
// request parameter) and code the HTTP status as a number.
// openai.ErrorDetail omits an empty param, so it is not used to write.
type errorInfo struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

type errorResponse struct {
	Error errorInfo `json:"error"`
}

// apiError is an error response about to be written.
type apiError struct {
	status int
	typ    string
	param  string // "" is written as null
	msg    string
}

func (e *apiError) body() errorResponse {
	b := errorResponse{Error: errorInfo{Message: e.msg, Type: e.typ, Code: e.status}}
	if e.param != "" {
		b.Error.Param = &e.param
	}
	return b
}

// writeAPIError writes e as a JSON response.
func writeAPIError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, e.body())
}

// httpError is what vLLM's handler of an HTTPException answers: the reason
// phrase as both message and type.
func httpError(status int) *apiError {
	return &apiError{status: status, typ: http.StatusText(status), msg: http.StatusText(status)}
}

// paramError is vLLM's VLLMValidationError: a 400 BadRequestError naming
// the parameter, whose message ends with the parameter and value, as the
// exception's __str__ renders them.
func paramError(param string, value any, msg string) *apiError {
	return &apiError{
		status: http.StatusBadRequest, typ: typeBadRequest, param: param,
		msg: fmt.Sprintf("%s (parameter=%s, value=%v)", msg, param, value),
	}
}

// validationError is a request that fails schema validation, as vLLM's
// validation_exception_handler reports it: type "Bad Request", param the
// dotted location of the first error, and pydantic's error list in the
// message. loc starts with "body"; the rest are field names or offsets.
func validationError(kind, msg string, loc ...any) *apiError {
	parts := make([]string, len(loc))
	for i, l := range loc {
		switch l := l.(type) {
		case string:
			parts[i] = pyString(l)
		default:
			parts[i] = fmt.Sprint(l)
		}
	}
	tuple := "(" + strings.Join(parts, ", ") + ")"
	if len(parts) == 1 {
		tuple = "(" + parts[0] + ",)"
	}
	param := make([]string, len(loc))
	for i, l := range loc {
		param[i] = fmt.Sprint(l)
	}
	return &apiError{
		status: http.StatusBadRequest,
		typ:    http.StatusText(http.StatusBadRequest),
		param:  strings.Join(param, "."),
		msg:    fmt.Sprintf("1 validation error:\n  {'type': %s, 'loc': %s, 'msg': %s}", pyString(kind), tuple, pyString(msg)),
	}
}

// pyString quotes s roughly as Python's repr does, which is enough for
// messages that only people read.
func pyString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// decodeError maps a failure to decode a JSON request body to the
// validation error pydantic would have raised for it.
func decodeError(err error) *apiError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return validationError("json_invalid", "JSON decode error", "body", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return validationError("model_attributes_type", "Input should be a valid dictionary or object to extract fields from", "body")
		}
		loc := []any{"body"}
		for f := range strings.SplitSeq(typ.Field, ".") {
			if n, err := strconv.Atoi(f); err == nil {
				loc = append(loc, n)
			} else {
				loc = append(loc, f)
			}
		}
		kind, msg := expectedType(typ.Type)
		return validationError(kind, msg, loc...)
	}
	return validationError("json_invalid", "JSON decode error: "+err.Error(), "body")
}

// expectedType names the JSON type a Go field wants in pydantic's terms.
func expectedType(t reflect.Type) (kind, msg string) {
	if t == nil {
		return "value_error", "Input is invalid"
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int_type", "Input should be a valid integer"
	case reflect.Float32, reflect.Float64:
		return "float_type", "Input should be a valid number"
	case reflect.Bool:
		return "bool_type", "Input should be a valid boolean"
	case reflect.String:
		return "string_type", "Input should be a valid string"
	case reflect.Slice, reflect.Array:
		return "list_type", "Input should be a valid list"
	}
	return "dict_type", "Input should be a valid dictionary"
}
