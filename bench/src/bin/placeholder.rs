fn main() {
    println!("benchmarks: see bench/src/bin");
}
