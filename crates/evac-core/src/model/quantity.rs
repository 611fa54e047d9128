//! Kubernetes resource quantities (`4Gi`, `512Mi`, `1G`, `100k`, `1.5e9`, `500m`), as numbers.
//!
//! The grammar is `resource.Quantity`'s (k8s.io/apimachinery `pkg/api/resource/quantity.go`):
//! an optionally signed number (`+1`, `-2.5`, `.5`, `5.`), then a binary suffix (`Ki` ... `Ei`),
//! a decimal suffix (`m`, none, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent (`e3`,
//! `E-2`).

const KI: f64 = 1024.0;

/// The value of a quantity, or `None` when it is not one.
pub fn bytes(quantity: &str) -> Option<f64> {
    let quantity = quantity.trim();
    let unsigned = quantity.strip_prefix(['+', '-']).unwrap_or(quantity);
    let negative = quantity.starts_with('-');
    let split = unsigned.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(split);
    // `parse` takes `.5` and `5.`, and refuses `.`, `1.2.3` and the empty string.
    if !number.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => KI,
        "Mi" => KI * KI,
        "Gi" => KI * KI * KI,
        "Ti" => KI * KI * KI * KI,
        "Pi" => KI * KI * KI * KI * KI,
        "Ei" => KI * KI * KI * KI * KI * KI,
        _ => {
            // An optionally signed integer, as `i32`'s parser reads it (`e3`, `E+3`, `e-2`).
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            10f64.powi(exponent.parse::<i32>().ok()?)
        }
    };
    let value = number * scale;
    Some(if negative { -value } else { value })
}

/// `bytes` for a person to read, in the largest binary unit that keeps it at least 1, with at
/// most one decimal: `13Gi`, `9.5Gi`, `512Mi`, `-1Gi`.
pub fn format_bytes(bytes: f64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Ki", 1024.0),
    ];
    let (unit, scale) = UNITS.into_iter().find(|(_, scale)| bytes.abs() >= *scale).unwrap_or(("", 1.0));
    let value = (bytes / scale * 10.0).round() / 10.0;
    format!("{value}{unit}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_in_the_largest_unit() {
        let gi = 1024.0 * 1024.0 * 1024.0;
        assert_eq!(super::format_bytes(13.0 * gi), "13Gi");
        assert_eq!(super::format_bytes(9.5 * gi), "9.5Gi");
        assert_eq!(super::format_bytes(512.0 * 1024.0 * 1024.0), "512Mi");
        assert_eq!(super::format_bytes(-gi), "-1Gi");
        assert_eq!(super::format_bytes(2048.0 * gi), "2Ti");
        assert_eq!(super::format_bytes(1536.0), "1.5Ki");
        assert_eq!(super::format_bytes(12.0), "12");
    }

    #[test]
    fn reads_binary_and_decimal_suffixes() {
        assert_eq!(super::bytes("2Gi"), Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(super::bytes("512Mi"), Some(512.0 * 1024.0 * 1024.0));
        assert_eq!(super::bytes("1G"), Some(1e9));
        assert_eq!(super::bytes("1.5k"), Some(1500.0));
        assert_eq!(super::bytes("42"), Some(42.0));
        assert_eq!(super::bytes("4Qi"), None);
        assert_eq!(super::bytes("Gi"), None);
        for bad in [
            "", ".", "-", "+Gi", "1.2.3", "1e", "1e+", "1ee3", "1e3.5", "1Gi5", "1 Gi", "--1", "1mi", "1e3Gi",
        ] {
            assert_eq!(super::bytes(bad), None, "{bad:?}");
        }
    }

    /// Each suffix of `resource.Quantity` that memory figures use, at its value in
    /// k8s.io/apimachinery: decimal powers of 1000 (`k`, `M`, `G`, `T`) and binary powers of 1024
    /// (`Ki`, `Mi`, `Gi`, `Ti`).
    #[test]
    fn every_suffix_at_its_value() {
        let rows: &[(&str, f64)] = &[
            ("1", 1.0),
            ("1k", 1_000.0),
            ("1M", 1_000_000.0),
            ("1G", 1_000_000_000.0),
            ("1T", 1_000_000_000_000.0),
            ("1Ki", 1_024.0),
            ("1Mi", 1_048_576.0),
            ("1Gi", 1_073_741_824.0),
            ("1Ti", 1_099_511_627_776.0),
            ("1P", 1e15),
            ("1E", 1e18),
            ("1Pi", 1_125_899_906_842_624.0),
            ("1Ei", 1_152_921_504_606_846_976.0),
            ("1500m", 1.5),
            ("1e3", 1_000.0),
            ("1E3", 1_000.0),
            ("2.5e-3", 0.0025),
            ("1e+2", 100.0),
            ("+1Gi", 1_073_741_824.0),
            ("-1Gi", -1_073_741_824.0),
            (".5Ki", 512.0),
            ("5.Ki", 5_120.0),
            ("3500Mi", 3_670_016_000.0),
            ("16Gi", 17_179_869_184.0),
            ("129M", 129_000_000.0),
            ("123Ki", 125_952.0),
            ("2T", 2_000_000_000_000.0),
            ("0.5Gi", 536_870_912.0),
            ("0", 0.0),
            // A figure as a node agent may publish it, padded.
            (" 4Gi\n", 4_294_967_296.0),
        ];
        for (quantity, bytes) in rows {
            assert_eq!(super::bytes(quantity), Some(*bytes), "{quantity:?}");
        }
    }

    /// Suffixes are case-sensitive (`K` and `gi` are not Kubernetes suffixes) and follow the number
    /// directly; anything else is not a quantity.
    #[test]
    fn what_is_not_a_quantity() {
        for text in ["", "Gi", "1K", "1gi", "1mi", "1 Gi", "1GiB", "1.2.3Gi", "one", "-", "Mi1"] {
            assert_eq!(super::bytes(text), None, "{text:?}");
        }
    }
}
