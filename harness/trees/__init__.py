"""vLLM trees and environments: pristine sources, what their tests need, a
released wheel, and the environment of a process that runs inside a tree."""
