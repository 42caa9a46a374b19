"""The contract every backend meets: the core verbs (`base`), the optional capabilities
(`capabilities`), what durable consumers stage (`staged`), the refusals worded once
(`refusals`), rows as every backend keeps them (`rows`) and the verbs a backend may
inherit (`derived`)."""
