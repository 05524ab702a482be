"""A model's pretrained config gives its preprocessing, without building the model or any download."""

from ddptrain.models.preprocess import pretrained_preprocessing


def test_a_timm_model_brings_its_own_mean_std_size_and_crop():
    assert pretrained_preprocessing("timm:test_resnet") == {
        "img_size": 160,
        "mean": (0.5, 0.5, 0.5),
        "std": (0.5, 0.5, 0.5),
        "interpolation": "bilinear",
        "crop_fraction": 0.95,
    }
    assert pretrained_preprocessing("timm:test_efficientnet")["interpolation"] == "bicubic"


def test_a_torchvision_model_takes_its_default_weights_transforms():
    found = pretrained_preprocessing("resnet34")  # ResNet34_Weights.DEFAULT: resize 256, crop 224, bilinear
    assert found == {
        "img_size": 224,
        "mean": (0.485, 0.456, 0.406),
        "std": (0.229, 0.224, 0.225),
        "interpolation": "bilinear",
        "crop_fraction": 0.875,
    }


def test_an_unknown_name_has_no_config_and_is_left_to_the_model_builder():
    assert pretrained_preprocessing("not_a_model") == {} and pretrained_preprocessing("timm:not_a_model") == {}
