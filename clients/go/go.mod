module redlockd

go 1.19
