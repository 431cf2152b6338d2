// Command standin is a tiny static program the image tests build for each
// platform in place of Courier's binaries, which take minutes to compile.
package main

func main() { println("standin") }
