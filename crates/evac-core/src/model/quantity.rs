//! Kubernetes resource quantities (`4Gi`, `512Mi`, `1G`, `100k`), as bytes.

/// The value of a quantity, or `None` when it is not one.
pub fn bytes(quantity: &str) -> Option<f64> {
    let quantity = quantity.trim();
    let split = quantity.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(number * scale)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_binary_and_decimal_suffixes() {
        assert_eq!(super::bytes("2Gi"), Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(super::bytes("512Mi"), Some(512.0 * 1024.0 * 1024.0));
        assert_eq!(super::bytes("1G"), Some(1e9));
        assert_eq!(super::bytes("1.5k"), Some(1500.0));
        assert_eq!(super::bytes("42"), Some(42.0));
        assert_eq!(super::bytes("4Qi"), None);
        assert_eq!(super::bytes("Gi"), None);
    }
}
