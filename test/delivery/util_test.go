package delivery

import "os"

func readFile(f string) ([]byte, error) { return os.ReadFile(f) }
