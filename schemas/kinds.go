package schemas

import "github.com/santhosh-tekuri/jsonschema/v6/kind"

type (
	kindRequired   = kind.Required
	kindAdditional = kind.AdditionalProperties
)
