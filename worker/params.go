package worker

import (
	"encoding/json"
	"errors"
	"fmt"
)

// describeDecodeError turns a params decoding error into a sentence naming
// the offending member, without quoting its value.
func describeDecodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			return fmt.Errorf("params must be %s, not a JSON %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
		}
		return fmt.Errorf("params.%s must be %s, not a JSON %s", field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	}
	return err
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "ptr":
		return "a value of another type"
	}
	return "of another type"
}
