// Minimal app for the start-up benchmark: prints "hello" and exits 0.
Console.WriteLine("hello");
