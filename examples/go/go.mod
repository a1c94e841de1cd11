module graphgen.example/translate

go 1.26

require github.com/yalue/onnxruntime_go v1.27.0
