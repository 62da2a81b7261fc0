//! The input level meter: a 10 ms block's loudness as 0.0 (silence, -60 dBFS and below)
//! to 1.0 (full scale), on a decibel scale so speech moves the meter visibly.

/// Loudness of `samples` (-1.0..=1.0) from 0.0 to 1.0: RMS in dBFS, -60 dB..0 dB
/// mapped linearly. Empty input is silence.
pub fn level_of(samples: &[f32]) -> f32 {
    if samples.is_empty() {
        return 0.0;
    }
    let sum: f64 = samples.iter().map(|s| f64::from(*s) * f64::from(*s)).sum();
    let rms = (sum / samples.len() as f64).sqrt();
    if rms.is_nan() || rms <= 1e-9 {
        return 0.0;
    }
    let db = 20.0 * rms.log10();
    ((db + 60.0) / 60.0).clamp(0.0, 1.0) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_is_zero_and_full_scale_is_near_one() {
        assert_eq!(level_of(&[]), 0.0);
        assert_eq!(level_of(&[0.0; 480]), 0.0);
        let full: Vec<f32> = (0..480)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!((level_of(&full) - 1.0).abs() < 1e-6);
        // -20 dBFS RMS → 2/3 of the scale.
        let quiet: Vec<f32> = (0..480)
            .map(|i| if i % 2 == 0 { 0.1 } else { -0.1 })
            .collect();
        assert!((level_of(&quiet) - 2.0 / 3.0).abs() < 1e-3);
    }

    #[test]
    fn out_of_range_and_odd_values_do_not_panic() {
        assert_eq!(level_of(&[5.0, -7.0]), 1.0);
        assert_eq!(level_of(&[f32::NAN, 0.1]), 0.0);
        assert_eq!(level_of(&[f32::INFINITY]), 1.0);
    }
}
