//! The proxy-wasm properties the adapter reads, as dynamic-module attributes
//! (`envoy_dynamic_module_type_attribute_id`), and their values in proxy-wasm's
//! encoding (strings as bytes, integers as 8 little-endian bytes).

/// How an attribute is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attribute {
    String(u32),
    Int(u32),
}

/// `envoy_dynamic_module_type_attribute_id` values (the header's enum order).
pub mod id {
    pub const REQUEST_PROTOCOL: u32 = 10;
    pub const REQUEST_TOTAL_SIZE: u32 = 14;
    pub const RESPONSE_CODE_DETAILS: u32 = 16;
    pub const RESPONSE_FLAGS: u32 = 17;
    pub const SOURCE_ADDRESS: u32 = 24;
}

/// The attribute behind a property path; `None`: not one the module maps (the adapter
/// then sees the property as absent).
pub fn of(path: &[&str]) -> Option<Attribute> {
    match path {
        ["request", "protocol"] => Some(Attribute::String(id::REQUEST_PROTOCOL)),
        ["request", "total_size"] => Some(Attribute::Int(id::REQUEST_TOTAL_SIZE)),
        ["response", "code_details"] => Some(Attribute::String(id::RESPONSE_CODE_DETAILS)),
        ["response", "flags"] => Some(Attribute::Int(id::RESPONSE_FLAGS)),
        ["source", "address"] => Some(Attribute::String(id::SOURCE_ADDRESS)),
        _ => None,
    }
}

/// An integer attribute as proxy-wasm hands an int64 property over.
pub fn int_bytes(value: u64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapters_properties_map_to_attributes() {
        assert_eq!(
            of(&["request", "protocol"]),
            Some(Attribute::String(id::REQUEST_PROTOCOL))
        );
        assert_eq!(
            of(&["response", "flags"]),
            Some(Attribute::Int(id::RESPONSE_FLAGS))
        );
        assert_eq!(
            of(&["response", "code_details"]),
            Some(Attribute::String(id::RESPONSE_CODE_DETAILS))
        );
        assert_eq!(
            of(&["request", "total_size"]),
            Some(Attribute::Int(id::REQUEST_TOTAL_SIZE))
        );
        assert_eq!(
            of(&["source", "address"]),
            Some(Attribute::String(id::SOURCE_ADDRESS))
        );
        assert_eq!(of(&["plugin_name"]), None);
        assert_eq!(of(&[]), None);
    }

    #[test]
    fn integers_read_back_as_the_adapter_reads_them() {
        let bytes = int_bytes(0x0102);
        assert_eq!(bytes.len(), 8);
        assert_eq!(u64::from_le_bytes(bytes.try_into().unwrap()), 0x0102);
    }
}
